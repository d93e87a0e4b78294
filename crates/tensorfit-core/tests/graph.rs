//! Graph building, scheduling and autodiff structure (values are checked against finite
//! differences in tensorfit-cpu's tests).

use tensorfit_core::args::{
    ActivationBackwardInputs, ActivationInputs, AdamInputs, AdamTargets, AddTimeRowsInputs,
    BinaryInputs, CopyInputs, CopyTargets, LstmForwardInputs, MatMulInputs, MaxTimeInputs,
    MeanTimeBackwardInputs, MeanTimeInputs, SliceTimeInputs,
};
use tensorfit_core::{
    backward, schedule, Activation, AdamParams, BinaryOp, Error, Graph, Op, Phase, Shape, TensorId,
};

/// An LSTM layer's inputs with one bias vector used for both (`b_ih`, `b_hh`).
fn lstm_inputs(
    [x, h0, c0, w_ih, w_hh]: [TensorId; 5],
    b_ih: TensorId,
    b_hh: TensorId,
) -> LstmForwardInputs<TensorId> {
    LstmForwardInputs {
        x,
        h0,
        c0,
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        lengths: None,
    }
}

#[test]
fn shape_errors_name_the_node_and_op() {
    let mut g = Graph::new();
    let a = g.input("a", [3, 4]);
    let b = g.input("b", [5, 6]);
    let e = g
        .apply(
            "projection",
            Op::MatMul {
                trans_a: false,
                trans_b: false,
            },
            MatMulInputs { a, b },
        )
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Shape { .. }));
    assert!(
        msg.contains("projection") && msg.contains("matmul"),
        "{msg}"
    );
    assert!(msg.contains("[3, 4]") && msg.contains("[5, 6]"), "{msg}");

    let x = g.input("x", [2, 3, 4]);
    let e = g
        .apply("bias", Op::Binary(BinaryOp::Add), BinaryInputs { a: x, b })
        .unwrap_err();
    assert!(e.to_string().contains("bias"));
    let e = g
        .apply(
            "last",
            Op::SliceTime { t: 2 },
            SliceTimeInputs { x, lengths: None },
        )
        .unwrap_err();
    assert!(e.to_string().contains("time step 2"), "{e}");
}

#[test]
fn lstm_shapes_are_checked_with_the_input_name() {
    let mut g = Graph::new();
    let x = g.input("x", [5, 2, 3]);
    let h0 = g.state("h0", [2, 4]);
    let c0 = g.state("c0", [2, 4]);
    let w_ih = g.parameter("w_ih", [16, 3]);
    let w_hh = g.parameter("w_hh", [16, 4]);
    let b = g.parameter("b", [16]);
    let bad = g.parameter("bad", [15]);
    let layer = [x, h0, c0, w_ih, w_hh];
    let keep = Op::LstmForward {
        keep_for_backward: true,
    };
    let outs = g
        .apply("l0", keep.clone(), lstm_inputs(layer, b, b))
        .unwrap();
    assert!(outs.cells.is_some());
    assert_eq!(g.shape(outs.y), &Shape::from([5, 2, 4]));
    assert_eq!(g.shape(outs.gates), &Shape::from([5, 2, 16]));
    assert_eq!(g.tensor(outs.h_n).name, "l0.h_n");
    let e = g
        .apply("l1", keep.clone(), lstm_inputs(layer, bad, b))
        .unwrap_err();
    assert!(e.to_string().contains("b_ih"), "{e}");
    // Lengths are one per batch row.
    let lengths = g.input("lengths", [2]);
    let padded = LstmForwardInputs {
        lengths: Some(lengths),
        ..lstm_inputs(layer, b, b)
    };
    g.apply("l2", keep.clone(), padded).unwrap();
    let three = g.input("three_lengths", [3]);
    let wrong = LstmForwardInputs {
        lengths: Some(three),
        ..lstm_inputs(layer, b, b)
    };
    let e = g.apply("l3", keep, wrong).unwrap_err();
    assert!(e.to_string().contains("lengths must have shape [2]"), "{e}");
}

#[test]
fn updates_run_after_every_reader_of_their_target() {
    let mut g = Graph::new();
    let p = g.parameter("p", [4]);
    let grad = g.input("grad", [4]);
    let scalars = g.input("scalars", [3]);
    let m = g.state("m", [4]);
    let v = g.state("v", [4]);
    let adam = Op::Adam(AdamParams {
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
    });
    let upd = g
        .update(
            "step",
            adam,
            AdamInputs { grad, scalars },
            AdamTargets { param: p, m, v },
        )
        .unwrap();
    // Added after the update, but reads the parameter: must be scheduled before it.
    let y = g
        .apply(
            "use",
            Op::Activation(Activation::Tanh),
            ActivationInputs { x: p },
        )
        .unwrap()
        .y;
    let order = schedule(&g).unwrap();
    let pos = |n| order.iter().position(|&x| x == n).unwrap();
    let reader = g.tensor(y).producer.unwrap();
    assert!(pos(reader) < pos(upd));
    assert_eq!(g.node(upd).phase, Phase::Update);

    // Targets must be persistent, and the shapes must match.
    let copy = |src, dst| (CopyInputs { src }, CopyTargets { dst });
    let (src, dst) = copy(grad, y);
    let e = g.update("bad", Op::Copy, src, dst).unwrap_err();
    assert!(e.to_string().contains("parameter or state"), "{e}");
    let (src, dst) = copy(scalars, m);
    let e = g.update("bad2", Op::Copy, src, dst).unwrap_err();
    assert!(e.to_string().contains("shape"), "{e}");
}

#[test]
fn backward_appends_gradient_nodes_and_sums_shared_uses() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3]);
    let w = g.parameter("w", [4, 3]);
    let b = g.parameter("b", [4]);
    let xw = g
        .apply(
            "xw",
            Op::MatMul {
                trans_a: false,
                trans_b: true,
            },
            MatMulInputs { a: x, b: w },
        )
        .unwrap()
        .c;
    let add = Op::Binary(BinaryOp::Add);
    let y = g.apply("y", add, BinaryInputs { a: xw, b }).unwrap().out;
    // y used twice: its gradient is the sum of both uses.
    let mul = Op::Binary(BinaryOp::Mul);
    let z = g.apply("z", mul, BinaryInputs { a: y, b: y }).unwrap().out;
    let dz = g.input("dz", [2, 4]);
    let forward_nodes = g.nodes().len();
    let grads = backward(&mut g, &[(z, dz)], &[w, b, x]).unwrap();
    assert_eq!(g.shape(grads[0].unwrap()), &Shape::from([4, 3]));
    assert_eq!(g.shape(grads[1].unwrap()), &Shape::from([4]));
    assert_eq!(g.shape(grads[2].unwrap()), &Shape::from([2, 3]));
    assert!(g.nodes()[forward_nodes..]
        .iter()
        .all(|n| n.phase == Phase::Backward));
    assert!(g.nodes().iter().any(|n| n.name.starts_with("grad_sum.")));
    assert!(g
        .nodes()
        .iter()
        .any(|n| matches!(&n.op, Op::SumToShape { shape } if shape == &Shape::from([4]))));
}

#[test]
fn an_inference_lstm_cannot_be_differentiated() {
    let mut g = Graph::new();
    let x = g.input("x", [3, 1, 2]);
    let h0 = g.state("h0", [1, 2]);
    let c0 = g.state("c0", [1, 2]);
    let w_ih = g.parameter("w_ih", [8, 2]);
    let w_hh = g.parameter("w_hh", [8, 2]);
    let b = g.parameter("b", [8]);
    let op = Op::LstmForward {
        keep_for_backward: false,
    };
    let outs = g
        .apply("l0", op, lstm_inputs([x, h0, c0, w_ih, w_hh], b, b))
        .unwrap();
    let dy = g.input("dy", [3, 1, 2]);
    let e = backward(&mut g, &[(outs.y, dy)], &[w_ih]).unwrap_err();
    assert!(e.to_string().contains("keep_for_backward"), "{e}");
}

#[test]
fn pooling_over_time_is_differentiated_by_its_backward_ops_and_at_gets_no_gradient() {
    let mut g = Graph::new();
    let x = g.input("x", [5, 3, 2]);
    let l = g.input("lengths", [3]);
    let lengths = Some(l);
    let mean = g.apply("mean", Op::MeanTime, MeanTimeInputs { x, lengths });
    let max = g.apply("max", Op::MaxTime, MaxTimeInputs { x, lengths });
    let (mean, max) = (mean.unwrap().out, max.unwrap());
    let (dmean, dmax) = (g.input("dmean", [3, 2]), g.input("dmax", [3, 2]));
    let seeds = [(mean, dmean), (max.out, dmax)];
    let grads = backward(&mut g, &seeds, &[x]).unwrap();
    assert_eq!(g.shape(grads[0].unwrap()), &Shape::from([5, 3, 2]));
    let inputs_of = |want: Op| {
        let node = g.nodes().iter().find(|n| n.op == want);
        node.map(|n| n.inputs.clone())
    };
    let mean_grad = inputs_of(Op::MeanTimeBackward { steps: 5 });
    assert_eq!(mean_grad, Some(vec![dmean, l]));
    let max_grad = inputs_of(Op::MaxTimeBackward { steps: 5 });
    assert_eq!(max_grad, Some(vec![dmax, max.at]));

    // A gradient arriving at `at` (an index) is refused, naming it.
    let dat = g.input("dat", [3, 2]);
    let e = backward(&mut g, &[(max.at, dat)], &[x]).unwrap_err();
    assert!(e.to_string().contains("`at`"), "{e}");
    // The backward ops have no gradient of their own.
    let op = Op::MeanTimeBackward { steps: 5 };
    let inputs = MeanTimeBackwardInputs {
        dout: dmean,
        lengths: None,
    };
    let dx = g.apply("again", op, inputs).unwrap().dx;
    let ddx = g.input("ddx", [5, 3, 2]);
    let e = backward(&mut g, &[(dx, ddx)], &[dmean]).unwrap_err();
    assert!(e.to_string().contains("has no gradient"), "{e}");
}

#[test]
fn gelus_gradient_reads_its_input_and_the_other_activations_do_not() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3]);
    for f in [Activation::Gelu, Activation::Tanh] {
        let y = g.apply(f.name(), Op::Activation(f), ActivationInputs { x });
        let y = y.unwrap().y;
        let dy = g.input(&format!("d{}", f.name()), [2, 3]);
        backward(&mut g, &[(y, dy)], &[x]).unwrap();
        let node = g.nodes().iter().find(|n| n.op == Op::ActivationBackward(f));
        let want = if f.needs_input() {
            vec![y, dy, x]
        } else {
            vec![y, dy]
        };
        assert_eq!(node.map(|n| n.inputs.clone()), Some(want), "{}", f.name());
    }
    // The shape rule: x for GELU (of y's shape), none for the others.
    let (y, dy, other) = (
        g.input("y", [2, 3]),
        g.input("dy", [2, 3]),
        g.input("o", [3, 2]),
    );
    let mut grad = |name: &str, f, x| {
        let inputs = ActivationBackwardInputs { y, dy, x };
        g.apply(name, Op::ActivationBackward(f), inputs).map(|_| ())
    };
    assert!(grad("gelu_x", Activation::Gelu, Some(x)).is_ok());
    let e = grad("gelu_no_x", Activation::Gelu, None).unwrap_err();
    assert!(e.to_string().contains("gelu's gradient needs x"), "{e}");
    assert!(grad("gelu_other_x", Activation::Gelu, Some(other)).is_err());
    let e = grad("relu_x", Activation::Relu, Some(x)).unwrap_err();
    assert!(e.to_string().contains("relu's gradient takes no x"), "{e}");
}

#[test]
fn a_tables_gradient_sums_the_batch_into_all_its_rows_and_x_gets_dout() {
    let mut g = Graph::new();
    let x = g.input("x", [4, 3, 2]);
    let table = g.parameter("pos", [6, 2]);
    let out = g.apply("add", Op::AddTimeRows, AddTimeRowsInputs { x, table });
    let out = out.unwrap().out;
    let dout = g.input("dout", [4, 3, 2]);
    let grads = backward(&mut g, &[(out, dout)], &[x, table]).unwrap();
    assert_eq!(grads[0], Some(dout));
    let dtable = grads[1].unwrap();
    assert_eq!(g.shape(dtable), &Shape::from([6, 2]));
    let node = g.nodes().iter().find(|n| n.outputs == [dtable]).unwrap();
    assert_eq!(
        (&node.op, &node.inputs),
        (&Op::SumBatchToRows { rows: 6 }, &vec![dout])
    );
    // A sequence longer than the table is refused, saying so.
    let long = g.input("long", [7, 3, 2]);
    let e = g
        .apply(
            "too_long",
            Op::AddTimeRows,
            AddTimeRowsInputs { x: long, table },
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("7 steps is longer than the table's 6 positions"),
        "{e}"
    );
}

#[test]
fn every_activation_is_in_all_once() {
    // The match is exhaustive: a new variant is a compile error here until it has
    // its place in `Activation::ALL`.
    let place = |a: Activation| match a {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::Tanh => 2,
        Activation::Sigmoid => 3,
        Activation::Gelu => 4,
    };
    for (i, a) in Activation::ALL.into_iter().enumerate() {
        assert_eq!(place(a), i, "{}", a.name());
    }
}

#[test]
fn only_the_gates_of_an_lstm_that_keeps_nothing_are_scratch() {
    let forward = |keep_for_backward| Op::LstmForward { keep_for_backward };
    assert!(forward(false).output_is_scratch(3));
    assert!(!forward(true).output_is_scratch(3));
    assert!((0..5).all(|k| k == 3 || !forward(false).output_is_scratch(k)));
    assert!(!Op::Copy.output_is_scratch(0));
}
