//! `circe registry`.

use clap::Args;

use super::{Ctx, Report};
use crate::error::Result;
use crate::registry::Registry;
use crate::workspace::Workspace;

/// The intents and who may send them to whom (built in, plus circe.yaml's changes).
#[derive(Debug, Args)]
pub struct RegistryArgs {}

pub fn run(ctx: &Ctx, _a: &RegistryArgs) -> Result<Report> {
    let reg = match Workspace::open(&ctx.root_spec()) {
        Ok(ws) => ws.registry,
        Err(e) if e.kind == crate::error::Kind::Usage => Registry::builtin(),
        Err(e) => return Err(e),
    };
    Ok(Report::new(reg.table(), &reg))
}
