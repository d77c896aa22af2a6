//! `circe demo`.

use clap::Args;

use super::{Ctx, Report};
use crate::engine::local::ScratchDir;
use crate::error::Result;
use crate::fixture;

/// The reference's whole message flow, narrated, in a temporary root, at today's times:
/// the coordinator posts a task, an engineer claims it, works, runs a check, hands it to
/// QA, QA tests and reports, and the coordinator sees it completed. Ends with the board
/// and what to run next in your own project.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe demo\n  circe demo --keep     # then look around the root it prints"
)]
pub struct DemoArgs {
    /// Keep the temporary root and print its path (to look around with ls and cat).
    #[arg(long)]
    pub keep: bool,
}

pub fn run(ctx: &Ctx, a: &DemoArgs) -> Result<Report> {
    // The demo is the built-in `reference-flow` fixture, so the snapshot test checks what
    // it shows.
    let text = fixture::built_in("reference-flow").ok_or_else(|| {
        crate::error::Error::internal("the reference-flow fixture is not built in")
    })?;
    let steps = fixture::parse_steps(text)?;
    let mut root = ScratchDir::new("circe-demo")?;
    if a.keep {
        root.keep();
    }
    // Today's times: the scenario's last step happens now (to the second), the others
    // keep their spacing before it.
    let last = steps
        .iter()
        .filter_map(|s| match s {
            fixture::Step::Now(t) => crate::clock::parse(t),
            _ => None,
        })
        .chain(crate::clock::parse(fixture::START))
        .max()
        .unwrap_or_else(crate::clock::now);
    let now = crate::clock::now();
    let shift = chrono::TimeDelta::seconds((now - last).num_seconds());
    super::replay::narrate(root.path(), &steps, a.keep, ctx.json, shift)
}
