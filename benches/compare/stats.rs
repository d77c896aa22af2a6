//! Medians, percentiles, paired ratios, and the sample store of the rounds.

use std::collections::BTreeMap;

pub(crate) fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

pub(crate) fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if (p - 0.5).abs() < f64::EPSILON && s.len().is_multiple_of(2) {
        return f64::midpoint(s[s.len() / 2 - 1], s[s.len() / 2]);
    }
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let i = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[i]
}

/// Median of the per-round ratios a[i]/b[i].
pub(crate) fn paired_ratio(a: &[f64], b: &[f64]) -> f64 {
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    median(&r)
}

/// Samples: (operation, size) -> variant -> per-round ms.
pub(crate) type Samples = BTreeMap<(usize, usize), BTreeMap<&'static str, Vec<f64>>>;

pub(crate) fn push(s: &mut Samples, op: usize, size: usize, variant: &'static str, ms: f64) {
    s.entry((op, size)).or_default().entry(variant).or_default().push(ms);
}
