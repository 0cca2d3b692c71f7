//! Capacity planner: what a tiercache deployment needs for a workload.
//!
//! Inputs are a workload (item count and mean key and value sizes, or a trace
//! from which they are measured), the RAM tier size, the flash device (size,
//! 4 KiB random-read IOPS, rated DWPD over its warranty), the NIC, the write
//! rate, and prices. The formulas, all per server:
//!
//! ```text
//! item bytes           s = key + value + HEADER (24 B, the segment item header)
//! dataset              D = items * s
//! items on flash       F = max(0, D - ram) / s            (the RAM tier keeps the hottest)
//! index DRAM           I = tiercache_engine::index_dram_bytes(F)   (the server's index at its
//!                                                          target load: 8.0 B per item; or
//!                                                          F * --index-bytes when given)
//! RAM-tier overhead    R = (ram / s) * (index_bytes + HEADER)  (inside the RAM tier's budget)
//! DRAM needed          ram + I
//! flash needed         F * s / fill                        (fill: usable share, room to reclaim)
//! flash writes/day     W = sets_per_s * s * 86400 * write_amplification
//! device DWPD used     W / flash_device
//! device lifetime      warranty_years * rated_dwpd / used_dwpd
//! NIC limit (ops/s)    nic_bits_per_s / 8 / (value + key + RESPONSE_OVERHEAD)
//! flash reads/s        gets_per_s * F / items (uniform access); with a trace,
//!                      gets_per_s * (hit ratio RAM+flash - hit ratio RAM only)
//! all-RAM DRAM         items * (key + value + ALL_RAM_OVERHEAD)  (memcached: ~56 B item header + hash chain)
//! cost                 DRAM GB * dram_price + flash GB * flash_price, against all-RAM DRAM GB * dram_price
//! ```
//!
//! With a trace, the item count and sizes come from it, and the hit ratio is
//! the one the policy reaches on it with the RAM tier alone and with RAM plus
//! flash (a replay through the policy crate, see [`crate::replay`]).
//!
//! The seed's examples (extstore on NVMe, seed `000_*`) are unit tests:
//! 400,000 IOPS of 3072-byte values saturate 10 GbE (8192 bytes for 25 GbE);
//! a 1 TB device written 2 TB a day that lasts 5 years is rated 2 DWPD; at
//! 100 bytes of RAM per flash item (extstore) and 1 KiB values, flash holds
//! only about 10x the RAM spent on it.

use crate::replay::{run_job, ReplayOptions};
use crate::trace::{load, CsvColumns, Format};
use crate::units::{parse_size, SizeSpec};
use anyhow::{bail, Result};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

/// Bytes of the item header stored with every item in a segment.
pub const HEADER: u64 = 24;
/// Bytes of DRAM per flash-resident item in tiercache's index (DESIGN.md target).
pub const INDEX_BYTES: u64 = 8;
/// Bytes a get reply adds to the value on the wire (`VALUE key flags bytes\r\n`, `\r\nEND\r\n`), about.
pub const RESPONSE_OVERHEAD: u64 = 30;
/// Bytes of DRAM per item in an all-RAM memcached, besides key and value (item header, hash chain, slab slack).
pub const ALL_RAM_OVERHEAD: u64 = 56;

const GB: f64 = 1e9;

#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// Items in the cache (ignored with --trace).
    #[arg(long, default_value_t = 100_000_000)]
    pub items: u64,
    /// Mean value size in bytes (ignored with --trace).
    #[arg(long, default_value_t = 3072)]
    pub value_size: u64,
    /// Mean key size in bytes.
    #[arg(long, default_value_t = 32)]
    pub key_size: u64,
    /// Measure items and sizes from this trace, and replay it for hit ratios.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "oracle-general")]
    pub format: Format,
    /// CSV columns, as for the replay.
    #[arg(long)]
    pub csv_columns: Option<String>,
    /// Policy for the hit-ratio replay.
    #[arg(long, default_value = "s3fifo")]
    pub policy: String,
    /// RAM tier size (item memory, -m).
    #[arg(long, default_value = "64GiB", value_parser = bytes_arg)]
    pub ram: u64,
    /// Flash device size (default: what the dataset needs).
    #[arg(long, value_parser = bytes_arg)]
    pub flash: Option<u64>,
    /// Usable share of the flash device (the rest is room to reclaim segments).
    #[arg(long, default_value_t = 0.85)]
    pub flash_fill: f64,
    /// The device's 4 KiB random-read IOPS.
    #[arg(long, default_value_t = 400_000)]
    pub device_iops: u64,
    /// The device's rated drive writes per day.
    #[arg(long, default_value_t = 2.0)]
    pub dwpd: f64,
    /// The warranty period the DWPD rating holds for, in years.
    #[arg(long, default_value_t = 5.0)]
    pub warranty_years: f64,
    /// NIC speed in Gbit/s.
    #[arg(long, default_value_t = 10.0)]
    pub nic_gbit: f64,
    /// Gets per second the server must serve.
    #[arg(long, default_value_t = 200_000)]
    pub gets_per_s: u64,
    /// Sets (new or changed items written to flash) per second.
    #[arg(long, default_value_t = 10_000)]
    pub sets_per_s: u64,
    /// Flash write amplification (device bytes / admitted bytes).
    #[arg(long, default_value_t = 1.0)]
    pub write_amplification: f64,
    /// DRAM price per GB (10^9 bytes), in any currency (the cost is in it).
    #[arg(long, default_value_t = 3.0)]
    pub dram_price: f64,
    /// Flash price per GB (10^9 bytes), in the DRAM price's currency.
    #[arg(long, default_value_t = 0.1)]
    pub flash_price: f64,
    /// DRAM bytes per flash item in the index.
    /// Default: the server's own index at its target load
    /// (`tiercache_engine::index_dram_bytes`).
    #[arg(long)]
    pub index_bytes: Option<u64>,
    /// Print the plan as one JSON object.
    #[arg(long)]
    pub json: bool,
}

fn bytes_arg(s: &str) -> Result<u64, String> {
    match parse_size(s).map_err(|e| e.to_string())? {
        SizeSpec::Bytes(b) => Ok(b),
        SizeSpec::Fraction(_) => Err("a percentage makes no sense here".into()),
    }
}

/// The workload the plan is for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Workload {
    pub items: u64,
    pub key_size: u64,
    pub value_size: u64,
}

/// Everything the planner computes.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub workload: Workload,
    pub item_bytes: u64,
    pub dataset_bytes: u64,
    pub ram_tier_bytes: u64,
    pub ram_items: u64,
    pub flash_items: u64,
    pub index_dram_bytes: u64,
    pub dram_bytes: u64,
    pub flash_needed_bytes: u64,
    pub flash_device_bytes: u64,
    pub flash_fits: bool,
    pub flash_writes_per_day: f64,
    pub dwpd_used: f64,
    pub device_lifetime_years: f64,
    pub nic_saturation_ops: f64,
    pub flash_reads_per_s_max: f64,
    pub flash_read_headroom: f64,
    pub bottleneck: String,
    pub flash_to_dram_ratio: f64,
    pub all_ram_dram_bytes: u64,
    pub cost: f64,
    pub all_ram_cost: f64,
    /// The prices the costs are computed at, per GB (10^9 bytes).
    pub dram_price: f64,
    pub flash_price: f64,
    pub hit_ratio_ram_only: Option<f64>,
    pub hit_ratio_ram_flash: Option<f64>,
}

/// NIC limit in replies per second for a given reply size: `bits/s / 8 / bytes`.
pub fn nic_saturation_ops(nic_gbit: f64, reply_bytes: u64) -> f64 {
    nic_gbit * 1e9 / 8.0 / reply_bytes as f64
}

/// Years a device lasts: its rated endurance (rated DWPD over the warranty)
/// spent at the DWPD actually written.
pub fn device_lifetime_years(rated_dwpd: f64, warranty_years: f64, used_dwpd: f64) -> f64 {
    if used_dwpd <= 0.0 {
        f64::INFINITY
    } else {
        warranty_years * rated_dwpd / used_dwpd
    }
}

/// How many bytes of flash one byte of DRAM spent on flash items buys:
/// the item bytes on flash over the DRAM each needs.
pub fn flash_to_dram_ratio(item_bytes: u64, dram_per_item: u64) -> f64 {
    item_bytes as f64 / dram_per_item.max(1) as f64
}

/// What limits the deployment at the given load, every limit that is
/// crossed: the NIC, the flash device's IOPS, its endurance (it wears out
/// before its warranty ends), its size; "none" when nothing is.
fn bottleneck(a: &PlanArgs, nic_ops: f64, flash_reads: f64, p: &Plan) -> String {
    let mut limits = Vec::new();
    if a.gets_per_s as f64 > nic_ops {
        limits.push("nic".to_string());
    }
    if flash_reads > a.device_iops as f64 {
        limits.push("flash iops".to_string());
    }
    if p.device_lifetime_years < a.warranty_years {
        limits.push(format!(
            "flash endurance ({:.2} DWPD written against {:.2} rated: the device lasts {:.1} of its {:.0} warranty years)",
            p.dwpd_used, a.dwpd, p.device_lifetime_years, a.warranty_years
        ));
    }
    if !p.flash_fits {
        limits.push("flash size (the device is smaller than the data needs)".to_string());
    }
    if limits.is_empty() {
        "none".to_string()
    } else {
        limits.join("; ")
    }
}

/// Computes a plan. Hit ratios are filled in by [`run`] when a trace is given.
pub fn compute(a: &PlanArgs, w: Workload) -> Plan {
    let item_bytes = w.key_size + w.value_size + HEADER;
    let dataset_bytes = w.items * item_bytes;
    let ram_items = (a.ram / item_bytes).min(w.items);
    let flash_items = w.items - ram_items;
    let index_dram_bytes = match a.index_bytes {
        Some(b) => flash_items * b,
        None => tiercache_engine::index_dram_bytes(flash_items),
    };
    let index_per_item = index_dram_bytes.div_ceil(flash_items.max(1)).max(1);
    let flash_needed_bytes =
        ((flash_items * item_bytes) as f64 / a.flash_fill.clamp(0.05, 1.0)).ceil() as u64;
    let flash_device_bytes = a.flash.unwrap_or(flash_needed_bytes);
    let flash_writes_per_day =
        a.sets_per_s as f64 * item_bytes as f64 * 86400.0 * a.write_amplification;
    let dwpd_used = if flash_device_bytes == 0 {
        0.0
    } else {
        flash_writes_per_day / flash_device_bytes as f64
    };
    let nic = nic_saturation_ops(a.nic_gbit, w.value_size + w.key_size + RESPONSE_OVERHEAD);
    // At worst every get that is not served from RAM goes to flash; with a
    // uniform spread, the flash share of gets is the flash share of items.
    let flash_share = if w.items == 0 {
        0.0
    } else {
        flash_items as f64 / w.items as f64
    };
    let flash_reads = a.gets_per_s as f64 * flash_share;
    let dram_bytes = a.ram.min(dataset_bytes) + index_dram_bytes;
    let all_ram = w.items * (w.key_size + w.value_size + ALL_RAM_OVERHEAD);
    let cost =
        dram_bytes as f64 / GB * a.dram_price + flash_device_bytes as f64 / GB * a.flash_price;
    let mut plan = Plan {
        workload: w,
        item_bytes,
        dataset_bytes,
        ram_tier_bytes: a.ram,
        ram_items,
        flash_items,
        index_dram_bytes,
        dram_bytes,
        flash_needed_bytes,
        flash_device_bytes,
        flash_fits: flash_device_bytes >= flash_needed_bytes,
        flash_writes_per_day,
        dwpd_used,
        device_lifetime_years: device_lifetime_years(a.dwpd, a.warranty_years, dwpd_used),
        nic_saturation_ops: nic,
        flash_reads_per_s_max: flash_reads,
        flash_read_headroom: a.device_iops as f64 / flash_reads.max(1.0),
        bottleneck: String::new(),
        flash_to_dram_ratio: flash_to_dram_ratio(item_bytes, index_per_item),
        all_ram_dram_bytes: all_ram,
        cost,
        all_ram_cost: all_ram as f64 / GB * a.dram_price,
        dram_price: a.dram_price,
        flash_price: a.flash_price,
        hit_ratio_ram_only: None,
        hit_ratio_ram_flash: None,
    };
    plan.bottleneck = bottleneck(a, nic, flash_reads, &plan);
    plan
}

pub fn run(a: &PlanArgs) -> Result<()> {
    if a.flash_fill <= 0.0 || a.flash_fill > 1.0 {
        bail!("--flash-fill is a share in (0, 1]");
    }
    let mut trace = None;
    let w = match &a.trace {
        Some(path) => {
            let csv = match &a.csv_columns {
                Some(s) => CsvColumns::parse(s)?,
                None => CsvColumns::default(),
            };
            let t = load(path, a.format, &csv)?;
            let (objects, bytes) = t.footprint();
            if objects == 0 {
                bail!("the trace is empty");
            }
            let w = Workload {
                items: objects,
                key_size: 0,
                value_size: bytes / objects,
            };
            trace = Some(t);
            w
        }
        None => Workload {
            items: a.items,
            key_size: a.key_size,
            value_size: a.value_size,
        },
    };
    let mut plan = compute(a, w);
    if let Some(t) = &trace {
        crate::replay::check_policies(std::slice::from_ref(&a.policy))?;
        let p = AtomicU64::new(0);
        let o = ReplayOptions::default();
        // The replay counts object bytes only: give it the items a tier holds
        // (item bytes include key and header) times the mean object size.
        let hit =
            |cap: u64| -> Result<f64> { Ok(1.0 - run_job(t, &a.policy, cap, o, &p)?.miss_ratio) };
        let ram_cap = a.ram / plan.item_bytes * w.value_size.max(1);
        plan.hit_ratio_ram_only = Some(hit(ram_cap.max(1))?);
        let total_items = plan.ram_items
            + (plan.flash_device_bytes as f64 * a.flash_fill) as u64 / plan.item_bytes;
        let both = hit((total_items * w.value_size).max(1))?;
        plan.hit_ratio_ram_flash = Some(both);
        // Flash serves the hits the RAM tier alone would have missed.
        let ram_only = plan.hit_ratio_ram_only.unwrap_or(0.0);
        plan.flash_reads_per_s_max = a.gets_per_s as f64 * (both - ram_only).max(0.0);
        plan.flash_read_headroom = a.device_iops as f64 / plan.flash_reads_per_s_max.max(1.0);
        plan.bottleneck = bottleneck(
            a,
            plan.nic_saturation_ops,
            plan.flash_reads_per_s_max,
            &plan,
        );
    }
    if a.json {
        println!("{}", serde_json::to_string(&plan)?);
    } else {
        print!("{}", describe(&plan));
    }
    Ok(())
}

/// A size in binary units, as the sizes are given (`--ram 64GiB`).
fn gb(b: u64) -> String {
    const KIB: f64 = 1024.0;
    match b as f64 {
        x if x >= KIB.powi(4) => format!("{:.1} TiB", x / KIB.powi(4)),
        x if x >= KIB.powi(3) => format!("{:.1} GiB", x / KIB.powi(3)),
        x if x >= KIB.powi(2) => format!("{:.1} MiB", x / KIB.powi(2)),
        x => format!("{:.1} KiB", x / KIB),
    }
}

/// The plan for a person.
pub fn describe(p: &Plan) -> String {
    let w = &p.workload;
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("{k:<34} {v}\n"));
    line(
        "items",
        format!(
            "{} x ({} B key + {} B value + {HEADER} B header) = {}",
            w.items,
            w.key_size,
            w.value_size,
            gb(p.dataset_bytes)
        ),
    );
    line(
        "RAM tier",
        format!("{} holds {} items", gb(p.ram_tier_bytes), p.ram_items),
    );
    line("items on flash", format!("{}", p.flash_items));
    line(
        "DRAM for the flash index",
        format!(
            "{} ({:.1} B per flash item)",
            gb(p.index_dram_bytes),
            p.index_dram_bytes as f64 / p.flash_items.max(1) as f64
        ),
    );
    line("DRAM in all", gb(p.dram_bytes));
    line(
        "flash needed",
        format!(
            "{} (device {}{})",
            gb(p.flash_needed_bytes),
            gb(p.flash_device_bytes),
            if p.flash_fits { "" } else { ": TOO SMALL" }
        ),
    );
    line(
        "flash bytes per DRAM byte (index)",
        format!("{:.0}x", p.flash_to_dram_ratio),
    );
    line(
        "flash writes per day",
        format!(
            "{}, {:.2} DWPD of the device",
            gb(p.flash_writes_per_day as u64),
            p.dwpd_used
        ),
    );
    line(
        "device lifetime",
        format!("{:.1} years", p.device_lifetime_years),
    );
    line(
        "NIC saturates at",
        format!("{:.0} gets/s", p.nic_saturation_ops),
    );
    line(
        "flash reads/s",
        format!(
            "{:.0}, device headroom {:.1}x",
            p.flash_reads_per_s_max, p.flash_read_headroom
        ),
    );
    line("bottleneck at the given load", p.bottleneck.clone());
    if let (Some(r), Some(f)) = (p.hit_ratio_ram_only, p.hit_ratio_ram_flash) {
        line("hit ratio, RAM tier only", format!("{:.4}", r));
        line("hit ratio, RAM + flash", format!("{:.4}", f));
    }
    line(
        "cost (in the prices' currency)",
        format!(
            "{:.0} against {:.0} all-RAM ({} of DRAM), {}",
            p.cost,
            p.all_ram_cost,
            gb(p.all_ram_dram_bytes),
            if p.all_ram_cost >= p.cost {
                format!("{:.1}x cheaper", p.all_ram_cost / p.cost.max(1e-9))
            } else {
                format!("{:.1}x dearer", p.cost / p.all_ram_cost.max(1e-9))
            }
        ),
    );
    line(
        "  at prices per GB (10^9 B)",
        format!("DRAM {:.2}, flash {:.2}", p.dram_price, p.flash_price),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        plan: PlanArgs,
    }

    fn args(extra: &[&str]) -> PlanArgs {
        Cli::parse_from(std::iter::once("plan").chain(extra.iter().copied())).plan
    }

    #[test]
    fn seed_nic_example() {
        // "At 400,000 IOPS, a 3072-byte average value saturates 10G; 8192 for 25G."
        let ops = nic_saturation_ops(10.0, 3072);
        assert!((ops - 400_000.0).abs() / 400_000.0 < 0.02, "{ops}");
        let ops = nic_saturation_ops(25.0, 8192);
        assert!((ops - 400_000.0).abs() / 400_000.0 < 0.05, "{ops}");
        // With the reply's own bytes and a 32-byte key it is still about 400k.
        let p = compute(
            &args(&[]),
            Workload {
                items: 1000,
                key_size: 32,
                value_size: 3072,
            },
        );
        assert!((p.nic_saturation_ops - 400_000.0).abs() / 400_000.0 < 0.02);
    }

    #[test]
    fn a_device_worn_out_before_its_warranty_is_the_bottleneck() {
        // The operator's case: 10.89 DWPD on a 1 DWPD device said "none".
        let w = Workload {
            items: 100_000_000,
            key_size: 32,
            value_size: 1000,
        };
        let worn = compute(&args(&["--flash", "2TiB", "--sets-per-s", "100000"]), w);
        assert!(worn.device_lifetime_years < 5.0);
        assert!(
            worn.bottleneck.starts_with("flash endurance"),
            "{}",
            worn.bottleneck
        );
        let fine = compute(&args(&["--flash", "2TiB", "--sets-per-s", "1000"]), w);
        assert_eq!(fine.bottleneck, "none");
        let small = compute(&args(&["--flash", "1GiB", "--sets-per-s", "1"]), w);
        assert!(
            small.bottleneck.contains("flash size"),
            "{}",
            small.bottleneck
        );
    }

    #[test]
    fn sizes_come_back_in_the_units_they_are_given_in_and_costs_say_their_unit() {
        let p = compute(
            &args(&["--ram", "64GiB", "--flash", "2TiB"]),
            Workload {
                items: 100_000_000,
                key_size: 32,
                value_size: 1000,
            },
        );
        let text = describe(&p);
        assert!(text.contains("64.0 GiB holds"), "{text}");
        assert!(text.contains("(device 2.0 TiB)"), "{text}");
        // No size printed in decimal GB ("98.3 GB").
        let words: Vec<&str> = text.split_whitespace().collect();
        assert!(
            !words
                .windows(2)
                .any(|w| w[0].parse::<f64>().is_ok() && w[1].starts_with("GB")),
            "{text}"
        );
        assert!(text.contains("at prices per GB (10^9 B)"), "{text}");
        assert!(
            text.contains("dearer") || text.contains("cheaper"),
            "{text}"
        );
    }

    #[test]
    fn seed_dwpd_example() {
        // "A 1TB device that survives 5 years written 2TB every 24 hours: 2 DWPD."
        assert!((device_lifetime_years(2.0, 5.0, 2.0) - 5.0).abs() < 1e-9);
        assert!((device_lifetime_years(2.0, 5.0, 1.0) - 10.0).abs() < 1e-9);
        // The same through the planner: 2 TB/day of 1 TB-device writes.
        let a = args(&[
            "--flash",
            "1TB",
            "--sets-per-s",
            "1",
            "--dwpd",
            "2",
            "--warranty-years",
            "5",
        ]);
        let item = 2_000_000_000_000u64 / 86400; // bytes per set, to write 2 TB a day at 1 set/s
        let p = compute(
            &a,
            Workload {
                items: 10,
                key_size: 0,
                value_size: item - HEADER,
            },
        );
        assert!((p.dwpd_used - 2.0).abs() < 1e-3, "{}", p.dwpd_used);
        assert!((p.device_lifetime_years - 5.0).abs() < 1e-2);
    }

    #[test]
    fn seed_ram_overhead_example() {
        // extstore: ~100 B of RAM per flash item; at 1 KiB values flash holds ~10x RAM.
        assert!((flash_to_dram_ratio(1024, 100) - 10.24).abs() < 1e-9);
        // tiercache's 8 B index entry buys 128x.
        assert_eq!(flash_to_dram_ratio(1024, INDEX_BYTES), 128.0);
    }

    #[test]
    fn plan_adds_up() {
        let a = args(&[
            "--ram",
            "1GiB",
            "--items",
            "10000000",
            "--value-size",
            "1000",
            "--key-size",
            "40",
        ]);
        let w = Workload {
            items: a.items,
            key_size: a.key_size,
            value_size: a.value_size,
        };
        let p = compute(&a, w);
        assert_eq!(p.item_bytes, 1064);
        assert_eq!(p.ram_items, (1u64 << 30) / 1064);
        assert_eq!(p.ram_items + p.flash_items, 10_000_000);
        // The server's own formula: nine 7-byte entries to a 64-byte bucket
        // at 89% load, about 8 B per flash item.
        assert_eq!(
            p.index_dram_bytes,
            tiercache_engine::index_dram_bytes(p.flash_items)
        );
        let per_item = p.index_dram_bytes as f64 / p.flash_items as f64;
        assert!((7.5..8.0).contains(&per_item), "{per_item}");
        assert_eq!(p.dram_bytes, (1 << 30) + p.index_dram_bytes);
        // --index-bytes overrides it.
        let mut b = a.clone();
        b.index_bytes = Some(12);
        assert_eq!(compute(&b, w).index_dram_bytes, p.flash_items * 12);
        assert!(p.flash_fits);
        assert!(p.cost < p.all_ram_cost);
        assert!(describe(&p).contains("DRAM for the flash index"));
    }
}
