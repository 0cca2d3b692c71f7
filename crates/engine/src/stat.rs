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

/// Where a stat's line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The general `stats` lines.
    General,
    /// The flash tier's lines of `stats` (only when the tier runs).
    Flash,
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

/// Defines a struct of `u64` figures in which each field declares its
/// stats: its kind (`counter`, `gauge`, or `max`: a gauge that several
/// shards combine by taking the largest), then its `stats` name or names
/// (one field may be shown under memcached's name and tiercache's), each
/// optionally `in` a [`Section`] (`General` when not given). A kind
/// followed by `reset` is cleared by `stats reset`. The field's doc comment
/// is its help. The struct gets:
///
/// - `for_each(&self, f)`: calls `f(stat, value)` for every name, in
///   declaration order;
/// - `add(&mut self, other)`: adds another shard's figures (a sum, or the
///   largest for `max`);
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
///     }
/// }
/// ```
macro_rules! stats_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $kind:ident $($reset:ident)? => $($stat:literal $(in $section:ident)?),+
            );* $(;)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                pub $field: u64,
            )*
        }

        impl $name {
            /// Calls `f` with every declared stat and its value, in
            /// declaration order.
            pub fn for_each(&self, mut f: impl FnMut(&'static $crate::stat::Stat, u64)) {
                $(
                    {
                        const HELP: &str = concat!($($doc),*);
                        $(
                            f(
                                &$crate::stat::Stat {
                                    name: $stat,
                                    kind: stats_struct!(@kind $kind),
                                    help: HELP,
                                    section: stats_struct!(@section $($section)?),
                                },
                                self.$field,
                            );
                        )+
                    }
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
    (@kind counter) => { $crate::stat::Kind::Counter };
    (@kind gauge) => { $crate::stat::Kind::Gauge };
    (@kind max) => { $crate::stat::Kind::Gauge };
    (@merge max $a:expr, $b:expr) => { $a = $a.max($b) };
    (@merge $kind:ident $a:expr, $b:expr) => { $a += $b };
    (@reset reset $a:expr) => { $a = 0 };
    (@reset $a:expr) => {};
    (@section) => { $crate::stat::Section::General };
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
        }
    }

    #[test]
    fn walks_declarations_in_order_and_merges_by_kind() {
        let mut a = Figures {
            done: 1,
            longest: 5,
            both: 2,
        };
        a.add(&Figures {
            done: 2,
            longest: 3,
            both: 1,
        });
        let mut seen = Vec::new();
        a.for_each(|s, v| seen.push((s.name, s.kind, s.section, v)));
        assert_eq!(
            seen,
            [
                ("things_done", Kind::Counter, Section::General, 3),
                ("longest_us", Kind::Gauge, Section::General, 5),
                ("old_name", Kind::Gauge, Section::Flash, 3),
                ("new_name", Kind::Gauge, Section::Hidden, 3),
            ]
        );
        assert_eq!(
            Figures::declared()[0].help(),
            "Things done. Since the start."
        );
        a.reset();
        assert_eq!((a.done, a.longest, a.both), (0, 5, 3));
    }
}
