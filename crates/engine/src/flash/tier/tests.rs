//! The open write buffer's placement of records.

use super::*;

fn open() -> Open {
    Open {
        slot: 0,
        buf: AlignedBuf::new(64 << 10),
        write: BLOCK,
        records: 0,
        max_exptime: 0,
        never_expires: false,
        gaps: Vec::new(),
        checkpointed: 0,
        dirty_from: BLOCK,
    }
}

#[test]
fn small_records_fill_the_tails_that_larger_ones_left() {
    let mut o = open();
    // Three 1048-byte records fill 3144 bytes of the first data block;
    // the fourth goes to the next block, leaving a 952-byte tail.
    let at: Vec<usize> = (0..4).map(|_| o.place(1048)).collect();
    assert_eq!(at, [4096, 5144, 6192, 8192]);
    assert_eq!(o.gaps, [(7240, 952)]);
    // Small records go into that tail, first fit, one after another.
    assert_eq!(o.place(136), 7240);
    assert_eq!(o.place(136), 7376);
    assert_eq!(o.gaps, [(7512, 680)]);
    // One that does not fit the tail goes at the end.
    assert_eq!(o.place(1000), 9240);
    // Never across a block: every record ends in its block.
    for (a, size) in [(4096, 1048), (7240, 136), (7376, 136), (9240, 1000)] {
        assert_eq!(a / BLOCK, (a + size - 1) / BLOCK);
    }
    // A tail too small for any record is not kept.
    let mut o = open();
    o.place(4096 - 16);
    o.place(100);
    assert!(o.gaps.is_empty());
}
