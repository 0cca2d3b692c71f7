//! Capacity planner (placeholder while the replay lands).

use anyhow::Result;

#[derive(clap::Args)]
pub struct PlanArgs {}

pub fn run(_a: &PlanArgs) -> Result<()> {
    anyhow::bail!("not yet")
}
