//! tiercache-sim: replays cache traces through the eviction policies of
//! `tiercache-policy`, the code the server's engine runs, and plans capacity.
//!
//! ```text
//!  trace file ──► trace::load ──► Trace (ids, sizes, times, ops in RAM)
//!                                   │ shared, read-only
//!            ┌──────────────────────┼──────────────────────┐
//!        thread 1               thread 2               thread N
//!   replay(lru, 128MiB)    replay(sieve, 1GiB)      ... one job per (policy, size)
//!   QueueCache<Lru>        QueueCache<Sieve>
//!            └──────────────► report: table, JSON lines, CSV, SVG plot
//! ```
//!
//! - [`trace`]: oracleGeneral (plain, zstd), CSV with chosen columns, Twitter;
//! - [`replay`]: the replay loop, windows, the thread pool;
//! - [`engine_replay`]: the replay through the server's engine (`tiercache[:POLICY]`);
//! - [`job`]: a job's options, windows, counts and result, shared by both replays;
//! - [`report`]: output formats and the miss-ratio-curve plot;
//! - [`plan`]: the capacity planner (`tiercache-sim plan`);
//! - [`synth`]: synthetic Zipf traces and trace-like mixes (`tiercache-sim synth`);
//! - [`nhc`]: the NHC scheduler against two device models (`tiercache-sim nhc`);
//! - [`small_replay`]: the small-object store on an in-memory device (`tiercache-sim small`);
//! - [`units`]: human sizes.

pub mod engine_replay;
pub mod job;
pub mod nhc;
pub mod plan;
pub mod replay;
pub mod report;
pub mod small_replay;
pub mod synth;
pub mod trace;
pub mod units;
