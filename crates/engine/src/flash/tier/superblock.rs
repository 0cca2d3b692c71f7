//! The superblock: what a device holds at start decides whether it is
//! formatted, kept or refused (FORMAT.md, "Superblock").

use super::*;

/// Refuses devices holding data that is not ours (or another version of
/// ours) unless told to wipe them, then writes our superblock. Returns it,
/// whether the device already held our format with the same layout (its
/// contents kept), and whether its last run did not keep the crash journal.
/// A device stays marked "journal off" until [`FlashTier::covered`] clears
/// it, so a crash in between never trusts unjournaled contents.
pub(super) fn check_and_stamp(
    d: &dyn BlockDevice,
    no: u32,
    seg: usize,
    journal: u64,
    params: &TierParams,
) -> Result<(Superblock, bool, bool), DeviceError> {
    let mut b = AlignedBuf::new(BLOCK);
    let n = d
        .read_at(b.as_mut_slice(), 0)
        .map_err(|e| DeviceError::io(d.name(), "read", e))?;
    if n < BLOCK {
        b.as_mut_slice()[n..].fill(0);
    }
    let mut sb = Superblock {
        device_size: d.size(),
        segment_size: seg as u32,
        device_no: no,
        journal_bytes: journal as u32,
        journal_off: !params.crash_journal,
        version: format::SUPER_VERSION,
    };
    let (kept, was_off) = match Superblock::inspect(b.as_slice()) {
        DeviceContents::Ours(old) if old.same_layout(&sb) && !params.wipe => {
            sb.journal_off |= old.journal_off;
            if old == sb {
                return Ok((sb, true, old.journal_off));
            }
            (true, old.journal_off)
        }
        DeviceContents::Ours(old) => {
            if !params.wipe {
                tracing::warn!(
                    device = d.name(),
                    ?old,
                    new = ?sb,
                    "flash device layout changed (size, segment size or device order): its contents are dropped"
                );
            }
            (false, false)
        }
        DeviceContents::Empty => (false, false),
        DeviceContents::OtherVersion(v) if !params.wipe => {
            return Err(DeviceError::OtherVersion {
                name: d.name().to_string(),
                found: v,
                expected: format::SUPER_VERSION,
            })
        }
        DeviceContents::Foreign if !params.wipe => {
            return Err(DeviceError::Foreign {
                name: d.name().to_string(),
            })
        }
        _ => (false, false),
    };
    write_superblock(d, &sb)?;
    Ok((sb, kept, was_off))
}

pub(super) fn write_superblock(d: &dyn BlockDevice, sb: &Superblock) -> Result<(), DeviceError> {
    let mut b = AlignedBuf::new(BLOCK);
    sb.write(b.as_mut_slice());
    d.write_at(b.as_slice(), 0)
        .and_then(|_| d.sync())
        .map_err(|e| DeviceError::io(d.name(), "write", e))
}
