//! The packed weights `CpuBackend` keeps across inference calls of a recurrent layer
//! (`kernels::packs`) are never used once their weights change: after a host write of a
//! weight, after an op writes a weight (an optimizer step, a copy), after the buffer is
//! freed, each call gives what a fresh backend gives for the weights now there, bit for
//! bit, with the weights in the same arena buffer as the other tensors (so the outputs
//! written every call lie beside them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit_core::{Backend, Op, Shape, TensorView};
use tensorfit_cpu::kernels::gemm_fast;
use tensorfit_cpu::CpuBackend;
use tensorfit_testing::{Rng, TestRng};

/// A recurrent layer's inference forward: the op, its input shapes (batch 1, one step),
/// and where its two weights are in its inputs.
struct Layer {
    op: Op,
    inputs: Vec<Vec<usize>>,
    weights: [usize; 2],
}

fn lstm() -> Layer {
    let (i, h) = (7, 5);
    Layer {
        op: Op::LstmForward {
            keep_for_backward: false,
        },
        inputs: vec![
            vec![1, 1, i],
            vec![1, h],
            vec![1, h],
            vec![4 * h, i],
            vec![4 * h, h],
            vec![4 * h],
            vec![4 * h],
        ],
        weights: [3, 4],
    }
}

fn gru() -> Layer {
    let (i, h) = (6, 9);
    Layer {
        op: Op::GruForward {
            keep_for_backward: false,
        },
        inputs: vec![
            vec![1, 1, i],
            vec![1, h],
            vec![3 * h, i],
            vec![3 * h, h],
            vec![3 * h],
            vec![3 * h],
        ],
        weights: [2, 3],
    }
}

/// The layer's tensors in one arena: inputs, then outputs, 3 elements apart.
struct Placed {
    arena: tensorfit_core::BufferId,
    ins: Vec<TensorView>,
    outs: Vec<TensorView>,
}

fn place(be: &mut CpuBackend, layer: &Layer) -> Placed {
    let shapes: Vec<Shape> = layer.inputs.iter().map(|s| Shape::from(&s[..])).collect();
    let refs: Vec<&Shape> = shapes.iter().collect();
    let out_shapes = layer.op.infer_shapes(&refs).unwrap();
    let total: usize = shapes
        .iter()
        .chain(&out_shapes)
        .map(|s| s.numel() + 3)
        .sum();
    let arena = be.allocate(4 * total as u64).unwrap();
    let mut offset = 0;
    let mut at = |s: &Shape| {
        let v = TensorView::at(arena, offset, s.clone());
        offset += s.numel() + 3;
        v
    };
    let ins = shapes.iter().map(&mut at).collect();
    let outs = out_shapes.iter().map(&mut at).collect();
    Placed { arena, ins, outs }
}

/// The first output (`y`) of one call with `data` as the inputs, on a fresh backend.
fn fresh(layer: &Layer, data: &[Vec<f32>]) -> Vec<f32> {
    let mut be = CpuBackend::new();
    let p = place(&mut be, layer);
    for (v, d) in p.ins.iter().zip(data) {
        be.write(v, d).unwrap();
    }
    call(&mut be, layer, &p)
}

fn call(be: &mut CpuBackend, layer: &Layer, p: &Placed) -> Vec<f32> {
    be.execute(&layer.op, &p.ins, &p.outs).unwrap();
    let mut y = vec![0.0; p.outs[0].len()];
    be.read(&p.outs[0], &mut y).unwrap();
    y
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_kept_pack_never_outlives_its_weights() {
    let kept = gemm_fast::simd().is_some();
    for layer in [lstm(), gru()] {
        let mut rng = Rng::new(11);
        let mut data: Vec<Vec<f32>> = layer
            .inputs
            .iter()
            .map(|s| rng.signed_vec(s.iter().product()))
            .collect();
        let mut be = CpuBackend::new();
        let p = place(&mut be, &layer);
        for (v, d) in p.ins.iter().zip(&data) {
            be.write(v, d).unwrap();
        }
        let first = call(&mut be, &layer, &p);
        assert_eq!(bits(&first), bits(&fresh(&layer, &data)));
        assert_eq!(be.kept_pack_bytes() > 0, kept, "{:?}", layer.op);
        // Again: the kept copies serve, and give the same bits.
        assert_eq!(bits(&call(&mut be, &layer, &p)), bits(&first));

        // A host write of one weight (a restore, a loaded checkpoint).
        let [w_ih, w_hh] = layer.weights;
        data[w_hh] = rng.signed_vec(data[w_hh].len());
        be.write(&p.ins[w_hh], &data[w_hh]).unwrap();
        let after_write = call(&mut be, &layer, &p);
        assert_ne!(bits(&after_write), bits(&first));
        assert_eq!(bits(&after_write), bits(&fresh(&layer, &data)));

        // An op writing the other weight (as an optimizer step does): a copy from the
        // output `y`'s neighbour, the input `x`, scaled into place by a fresh vector.
        let src = be.allocate(4 * data[w_ih].len() as u64).unwrap();
        let src_view = TensorView::at(src, 0, p.ins[w_ih].shape.clone());
        data[w_ih] = rng.signed_vec(data[w_ih].len());
        be.write(&src_view, &data[w_ih]).unwrap();
        be.execute(&Op::Copy, &[src_view], &[p.ins[w_ih].clone()])
            .unwrap();
        let after_op = call(&mut be, &layer, &p);
        assert_ne!(bits(&after_op), bits(&after_write));
        assert_eq!(bits(&after_op), bits(&fresh(&layer, &data)));

        // Freeing the arena drops every copy packed from it.
        be.free(p.arena).unwrap();
        assert_eq!(be.kept_pack_bytes(), 0);
    }
}
