//! Device classes: the kinds of device the flash tier spreads over (fast,
//! capacity), [`CLASSES`] to go over them in order, and [`PerClass`]
//! arrays indexed by a class.
//!
//! A third class (CXL memory, NVM) is a new variant here, with its name
//! ([`DeviceClass::name`], which is also its `stats` prefix
//! `flash_{name}_*`) and its index; the compiler then shows the `match`es
//! that must place it, and `format.rs` refuses to build until the crash
//! journal's format has room for its floor (a new format version).

use std::ops::{Index, IndexMut};

/// A device's class. New items land on the fast class; items the fast
/// class reclaims that are still worth keeping move to the capacity class.
/// The order of the variants is the order of [`CLASSES`] and the class
/// byte of segment headers (format.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeviceClass {
    #[default]
    Fast,
    Capacity,
}

/// Every class, in index order (where new items land first).
pub const CLASSES: [DeviceClass; DeviceClass::COUNT] = [DeviceClass::Fast, DeviceClass::Capacity];

/// One value per device class, indexed by a [`DeviceClass`] (or by its
/// index, as the figures' readers do).
pub type PerClass<T> = [T; DeviceClass::COUNT];

impl DeviceClass {
    /// How many classes there are.
    pub const COUNT: usize = 2;

    /// Our names and memcached's extstore bucket names where they map:
    /// `default` (where new items land) and `lowttl` are the fast class,
    /// `compact`, `coldcompact` and `old` the capacity class.
    pub fn parse(s: &str) -> Option<DeviceClass> {
        match s {
            "fast" | "default" | "lowttl" => Some(DeviceClass::Fast),
            "capacity" | "compact" | "coldcompact" | "old" => Some(DeviceClass::Capacity),
            _ => None,
        }
    }

    /// Its name in `ext_path=PATH:SIZE:CLASS` and in `stats` (`flash_{name}_*`).
    pub fn name(self) -> &'static str {
        match self {
            DeviceClass::Fast => "fast",
            DeviceClass::Capacity => "capacity",
        }
    }

    /// Its place in [`CLASSES`] and in a [`PerClass`] array.
    pub const fn index(self) -> usize {
        match self {
            DeviceClass::Fast => 0,
            DeviceClass::Capacity => 1,
        }
    }

    /// The class of an index (of a class byte on the device), if there is one.
    pub fn from_index(i: usize) -> Option<DeviceClass> {
        CLASSES.get(i).copied()
    }
}

// CLASSES lists each class at its index.
const _: () = {
    let mut i = 0;
    while i < DeviceClass::COUNT {
        assert!(CLASSES[i].index() == i);
        i += 1;
    }
};

impl<T> Index<DeviceClass> for [T; DeviceClass::COUNT] {
    type Output = T;
    fn index(&self, c: DeviceClass) -> &T {
        &self[c.index()]
    }
}

impl<T> IndexMut<DeviceClass> for [T; DeviceClass::COUNT] {
    fn index_mut(&mut self, c: DeviceClass) -> &mut T {
        &mut self[c.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_trip_by_name_and_index() {
        for c in CLASSES {
            assert_eq!(DeviceClass::parse(c.name()), Some(c));
            assert_eq!(DeviceClass::from_index(c.index()), Some(c));
        }
        assert_eq!(DeviceClass::from_index(DeviceClass::COUNT), None);
        let mut per: PerClass<u32> = [0; DeviceClass::COUNT];
        per[DeviceClass::Capacity] += 5;
        assert_eq!(per, [0, 5]);
    }
}
