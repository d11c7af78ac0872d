//! Medians, ratios and targets: how runs become the figures of a table.

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
/// NaNs are left out.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// The median of the present values; `None` when none is present.
pub fn median_of(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values.into_iter().flatten().collect();
    median(&v)
}

/// Which way a figure is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Throughput: shale / peer must reach the target.
    Higher,
    /// Costs (write amplification, bytes, latency): shale / peer must stay at or below it.
    Lower,
}

/// A target on the ratio shale / peer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    /// The ratio to reach (or, for [`Better::Lower`], not to exceed).
    pub ratio: f64,
    /// Which way is better.
    pub better: Better,
}

impl Target {
    /// At least `ratio` times the peer.
    pub const fn at_least(ratio: f64) -> Target {
        Target { ratio, better: Better::Higher }
    }

    /// No more than `ratio` times the peer.
    pub const fn at_most(ratio: f64) -> Target {
        Target { ratio, better: Better::Lower }
    }

    /// Whether a measured ratio meets the target.
    pub fn met(&self, ratio: f64) -> bool {
        match self.better {
            Better::Higher => ratio >= self.ratio,
            Better::Lower => ratio <= self.ratio,
        }
    }

    /// `>= 1.5x` or `<= 1.0x`.
    pub fn label(&self) -> String {
        let op = if self.better == Better::Higher { ">=" } else { "<=" };
        format!("{op} {}x", trim_float(self.ratio))
    }
}

/// shale / peer; `None` when either is missing or the peer is zero.
pub fn ratio(shale: Option<f64>, peer: Option<f64>) -> Option<f64> {
    match (shale, peer) {
        (Some(s), Some(p)) if p != 0.0 => Some(s / p),
        _ => None,
    }
}

/// The verdict cell: `met` or `**MISSED**`, or `n/a` when a figure is missing.
pub fn verdict(target: Option<Target>, ratio: Option<f64>) -> String {
    match (target, ratio) {
        (Some(t), Some(r)) if t.met(r) => "met".into(),
        (Some(_), Some(_)) => "**MISSED**".into(),
        (Some(_), None) => "n/a (no figure)".into(),
        (None, _) => "-".into(),
    }
}

/// `1.5` for 1.5, `2` for 2.0.
pub fn trim_float(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 2.0, 1.0, 3.0]), Some(2.0));
        assert_eq!(median_of([None, Some(2.0), None]), Some(2.0));
        assert_eq!(median_of([None]), None);
    }

    #[test]
    fn ratios_and_targets() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
        assert_eq!(ratio(Some(3.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        let t = Target::at_least(1.5);
        assert!(t.met(1.5) && !t.met(1.49));
        assert_eq!(t.label(), ">= 1.5x");
        let t = Target::at_most(1.0);
        assert!(t.met(1.0) && t.met(0.5) && !t.met(1.01));
        assert_eq!(t.label(), "<= 1x");
        assert_eq!(verdict(Some(Target::at_least(2.0)), Some(1.0)), "**MISSED**");
        assert_eq!(verdict(Some(Target::at_least(2.0)), Some(2.0)), "met");
        assert_eq!(verdict(None, Some(2.0)), "-");
        assert_eq!(verdict(Some(Target::at_least(2.0)), None), "n/a (no figure)");
    }
}
