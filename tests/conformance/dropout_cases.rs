//! The dropout op's cases of the conformance suite (`ops.rs`): the mask must be the CPU's
//! bit for bit (a dropped element is 0, a kept one `x / (1 - p)`, so a mask bit that
//! differs fails the closeness check by |x| / (1 - p)), on odd sizes, sizes that a 1 KiB
//! binding splits into several launches, and an offset whose indices wrap past 2³².

use tensorfit::core::dropout::{key_input, step_key};
use tensorfit::core::{DropoutParams, HostTensor, Op};

use super::{case, Case, Tensors};
use tensorfit_testing::Rng;

pub(super) fn dropout_cases(r: &mut Rng, v: &mut Vec<Case>) {
    let cases: [(&[usize], f32, u32, u32); 5] = [
        (&[7, 5, 3], 0.2, 0, 0),
        (&[1], 0.5, 3, 0),
        (&[300, 7], 0.5, 1, 2100),
        (&[9, 11, 13], 0.0, 2, 0),
        (&[40, 31], 0.3, 65_537, u32::MAX - 600),
    ];
    for (step, (dims, p, site, offset)) in cases.into_iter().enumerate() {
        // Values away from 0, so that a kept element never looks dropped.
        let mut x = r.between(dims, 0.5, 2.0);
        x.data.iter_mut().step_by(2).for_each(|e| *e = -*e);
        let key = HostTensor::new([2], key_input(step_key(7, step as u64)).to_vec()).unwrap();
        let params = DropoutParams { p, site, offset };
        let name = format!("dropout {dims:?} p {p} site {site} offset {offset}");
        v.push(case(name, Op::Dropout(params), vec![x, key]));
    }
}
