//! Time as the ledger counts it: microseconds since the Unix epoch (UTC), half-open spans.

use serde::{Deserialize, Serialize};

pub type Micros = i64;

pub const MICROS_PER_SECOND: Micros = 1_000_000;
pub const MICROS_PER_HOUR: Micros = 3_600 * MICROS_PER_SECOND;
pub const MICROS_PER_DAY: Micros = 24 * MICROS_PER_HOUR;

/// `[start, end)`. Empty when `end <= start`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Span {
    pub start: Micros,
    pub end: Micros,
}

impl Span {
    pub fn new(start: Micros, end: Micros) -> Self {
        Self { start, end }
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    pub fn len(&self) -> Micros {
        (self.end - self.start).max(0)
    }

    pub fn seconds(&self) -> f64 {
        self.len() as f64 / MICROS_PER_SECOND as f64
    }

    pub fn intersect(&self, other: &Span) -> Span {
        Span {
            start: self.start.max(other.start),
            end: self.end.min(other.end),
        }
    }

    /// Seconds two spans share: the `interval_overlap_seconds` SQL function.
    pub fn overlap_seconds(&self, other: &Span) -> f64 {
        self.intersect(other).seconds()
    }

    pub fn contains(&self, t: Micros) -> bool {
        self.start <= t && t < self.end
    }

    /// The whole hours this span touches, as hour starts.
    pub fn hours(&self) -> impl Iterator<Item = Micros> {
        let first = floor_hour(self.start);
        let end = self.end;
        (0..)
            .map(move |i| first + i * MICROS_PER_HOUR)
            .take_while(move |h| *h < end)
    }
}

pub fn floor_hour(t: Micros) -> Micros {
    t.div_euclid(MICROS_PER_HOUR) * MICROS_PER_HOUR
}

pub fn floor_day(t: Micros) -> Micros {
    t.div_euclid(MICROS_PER_DAY) * MICROS_PER_DAY
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Micros = MICROS_PER_HOUR;

    #[test]
    fn overlap_is_the_shared_part_only() {
        let a = Span::new(0, 90 * MICROS_PER_SECOND);
        let b = Span::new(60 * MICROS_PER_SECOND, 200 * MICROS_PER_SECOND);
        assert_eq!(a.overlap_seconds(&b), 30.0);
        assert_eq!(
            a.overlap_seconds(&Span::new(100 * MICROS_PER_SECOND, 110 * MICROS_PER_SECOND)),
            0.0
        );
        assert!(a.intersect(&Span::new(200, 100)).is_empty());
    }

    #[test]
    fn hours_cover_partial_ends() {
        // 00:30 to 02:00 touches hours 00 and 01; to 02:00:00.000001 also touches 02.
        assert_eq!(Span::new(H / 2, 2 * H).hours().collect::<Vec<_>>(), [0, H]);
        assert_eq!(
            Span::new(H / 2, 2 * H + 1).hours().collect::<Vec<_>>(),
            [0, H, 2 * H]
        );
        assert_eq!(floor_hour(-1), -H);
    }
}
