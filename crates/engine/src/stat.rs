//! Stat declarations: each figure's `stats` name, its kind (a counter that
//! only counts up, or a gauge) and its help line, written once beside the
//! field that holds it with [`stats_struct!`]. Front ends walk the
//! declarations ([`Stat`]s, in declaration order) to write `stats` and
//! `/metrics` instead of listing names; shards' figures are summed by the
//! same declarations (`add`).

/// What a stat is to a scraper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only counts up (until `stats reset` or a restart): a Prometheus
    /// counter (`_total`).
    Counter,
    /// A level that goes up and down.
    Gauge,
}

/// Where a stat's line is written, beside the other lines of its struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// With its struct's lines (for the shards' figures, the general
    /// `stats` lines; for the flash tier's, memcached's `extstore_*` lines).
    Main,
    /// With memcached's `extstore_*` lines (only when the flash tier runs).
    Extstore,
    /// With the flash tier's own lines (only when the tier runs).
    Flash,
    /// With the device classes' lines.
    Classes,
    /// With the flash tier's own lines, only when there is a capacity class.
    CapacityClass,
    /// No line of its own: a front end folds it into another figure (a
    /// sum, or its own counter of the same name).
    Hidden,
}

/// One declared stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its `stats` name (for per-class figures, the part after the class).
    pub name: &'static str,
    pub kind: Kind,
    /// The field's doc comment.
    pub help: &'static str,
    pub section: Section,
}

impl Stat {
    /// The help line, without the doc comment's leading spaces.
    pub fn help(&self) -> &'static str {
        self.help.trim()
    }
}

/// A field [`stats_struct!`] shows: its value in `stats`, and how shards'
/// values combine.
pub trait Figure {
    fn value(&self) -> u64;
    /// Adds another shard's.
    fn sum(&mut self, other: &Self);
    /// Keeps the larger.
    fn max(&mut self, other: &Self);
}

impl Figure for u64 {
    fn value(&self) -> u64 {
        *self
    }
    fn sum(&mut self, other: &u64) {
        *self += other;
    }
    fn max(&mut self, other: &u64) {
        *self = (*self).max(*other);
    }
}

/// A yes/no figure: 1 or 0 in `stats`; any shard's yes is a yes.
impl Figure for bool {
    fn value(&self) -> u64 {
        u64::from(*self)
    }
    fn sum(&mut self, other: &bool) {
        *self |= other;
    }
    fn max(&mut self, other: &bool) {
        *self |= other;
    }
}

/// Defines a struct of figures in which each field declares its stats:
/// its kind (`counter`, `gauge`, or `max`: a gauge that several shards
/// combine by taking the largest; `plain` for a field that is no stat of
/// its own; `nested` for a struct declared the same way, whose stats are
/// walked and added in its place), its type in brackets when it is not `u64` (a [`Figure`], or
/// anything for `plain`), `reset` when `stats reset` clears it, then after
/// `=>` its `stats` name or names (one field may be shown under
/// memcached's name and tiercache's), each optionally `in` a [`Section`]
/// (`Main` when not given). The field's doc comment is its help. The
/// struct gets:
///
/// - `for_each(&self, f)`: calls `f(stat, value)` for every name, in
///   declaration order;
/// - `add(&mut self, other)`: adds another shard's figures (a sum, or the
///   largest for `max`; `plain` fields are left);
/// - `reset(&mut self)`: zeroes the fields marked `reset`;
/// - `declared()`: the [`Stat`]s, in that order.
///
/// ```ignore
/// stats_struct! {
///     /// Counters a shard keeps.
///     #[derive(Debug, Default, Clone, Copy)]
///     pub struct ShardStats {
///         /// Items held.
///         curr_items: gauge => "curr_items";
///         /// Items evicted.
///         evictions: counter reset => "evictions";
///         /// Requests served from flash.
///         flash_hits: counter => "get_extstore" in Flash, "flash_hits" in Flash;
///         /// Serving from RAM only.
///         degraded: gauge [bool] => "flash_degraded";
///         /// What recovery found.
///         recovery: plain [Option<Recovery>];
///     }
/// }
/// ```
macro_rules! stats_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $kind:ident $([$ty:ty])? $($reset:ident)?
                    $(=> $($stat:literal $(in $section:ident)?),+)?
            );* $(;)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                pub $field: stats_struct!(@ty $($ty)?),
            )*
        }

        impl $name {
            /// Calls `f` with every declared stat and its value, in
            /// declaration order.
            pub fn for_each(&self, mut f: impl FnMut(&'static $crate::stat::Stat, u64)) {
                $(
                    stats_struct!(
                        @visit f, self.$field, $kind, concat!($($doc),*);
                        $($($stat $(in $section)?),+)?
                    );
                )*
            }

            /// Adds another shard's (or region's) figures.
            pub fn add(&mut self, other: &$name) {
                $(
                    stats_struct!(@merge $kind self.$field, other.$field);
                )*
            }

            /// Zeroes the figures `stats reset` clears.
            pub fn reset(&mut self) {
                $(
                    stats_struct!(@reset $($reset)? self.$field);
                )*
            }

            /// Every declared stat, in declaration order.
            pub fn declared() -> Vec<&'static $crate::stat::Stat> {
                let mut v = Vec::new();
                $name::default().for_each(|s, _| v.push(s));
                v
            }
        }
    };
    (@visit $f:ident, $v:expr, nested, $help:expr;) => {
        $v.for_each(&mut $f)
    };
    (@visit $f:ident, $v:expr, $kind:ident, $help:expr; $($stat:literal $(in $section:ident)?),*) => {
        $(
            $f(
                &$crate::stat::Stat {
                    name: $stat,
                    kind: stats_struct!(@kind $kind),
                    help: $help,
                    section: stats_struct!(@section $($section)?),
                },
                $crate::stat::Figure::value(&$v),
            );
        )*
    };
    (@ty) => { u64 };
    (@ty $t:ty) => { $t };
    (@kind counter) => { $crate::stat::Kind::Counter };
    (@kind gauge) => { $crate::stat::Kind::Gauge };
    (@kind max) => { $crate::stat::Kind::Gauge };
    (@merge plain $a:expr, $b:expr) => {};
    (@merge nested $a:expr, $b:expr) => { $a.add(&$b) };
    (@merge max $a:expr, $b:expr) => { $crate::stat::Figure::max(&mut $a, &$b) };
    (@merge $kind:ident $a:expr, $b:expr) => { $crate::stat::Figure::sum(&mut $a, &$b) };
    (@reset reset $a:expr) => { $a = Default::default() };
    (@reset $a:expr) => {};
    (@section) => { $crate::stat::Section::Main };
    (@section $s:ident) => { $crate::stat::Section::$s };
}

pub(crate) use stats_struct;

#[cfg(test)]
mod tests {
    use super::{Kind, Section};

    stats_struct! {
        /// A test struct.
        #[derive(Debug, Default, Clone, Copy)]
        pub struct Figures {
            /// Things done.
            /// Since the start.
            done: counter reset => "things_done";
            /// The longest.
            longest: max => "longest_us";
            /// Shown twice.
            both: gauge => "old_name" in Flash, "new_name" in Hidden;
            /// Yes or no.
            on: gauge [bool] => "on";
            /// No stat.
            note: plain [Option<u8>];
        }
    }

    #[test]
    fn walks_declarations_in_order_and_merges_by_kind() {
        let mut a = Figures {
            done: 1,
            longest: 5,
            both: 2,
            on: false,
            note: Some(1),
        };
        a.add(&Figures {
            done: 2,
            longest: 3,
            both: 1,
            on: true,
            note: Some(2),
        });
        let mut seen = Vec::new();
        a.for_each(|s, v| seen.push((s.name, s.kind, s.section, v)));
        assert_eq!(
            seen,
            [
                ("things_done", Kind::Counter, Section::Main, 3),
                ("longest_us", Kind::Gauge, Section::Main, 5),
                ("old_name", Kind::Gauge, Section::Flash, 3),
                ("new_name", Kind::Gauge, Section::Hidden, 3),
                ("on", Kind::Gauge, Section::Main, 1),
            ]
        );
        assert_eq!(
            Figures::declared()[0].help(),
            "Things done. Since the start."
        );
        a.reset();
        assert_eq!((a.done, a.longest, a.both, a.note), (0, 5, 3, Some(1)));
    }

    /// Each struct declares a name once, and the kinds `/metrics` has
    /// always typed these figures with.
    #[test]
    fn engine_figures_are_declared_once_with_their_kinds() {
        use crate::flash::{ClassStats, FlashStats};
        use crate::shard::ShardStats;
        use crate::small::{SmallStats, SmallTotals};
        for declared in [
            ShardStats::declared(),
            SmallStats::declared(),
            SmallTotals::declared(),
            FlashStats::declared(),
            ClassStats::declared(),
        ] {
            let mut seen = std::collections::HashSet::new();
            for s in &declared {
                assert!(seen.insert(s.name), "{} declared twice", s.name);
            }
        }
        let kind = |v: Vec<&'static super::Stat>, name: &str| {
            v.iter().find(|s| s.name == name).map(|s| s.kind)
        };
        for (name, k) in [
            ("curr_items", Kind::Gauge),
            ("bytes", Kind::Gauge),
            ("segment_evacuate_max_us", Kind::Gauge),
            ("segment_evacuate_us", Kind::Counter),
            ("evictions", Kind::Counter),
            ("get_extstore", Kind::Counter),
        ] {
            assert_eq!(kind(ShardStats::declared(), name), Some(k), "{name}");
        }
        for (name, k) in [
            ("queue_depth", Kind::Gauge),
            ("segments", Kind::Gauge),
            ("device_us_sum", Kind::Counter),
        ] {
            assert_eq!(kind(ClassStats::declared(), name), Some(k), "{name}");
        }
        assert_eq!(
            kind(FlashStats::declared(), "flash_journal_failed"),
            Some(Kind::Counter)
        );
    }
}
