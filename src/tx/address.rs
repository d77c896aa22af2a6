//! TX addresses `mesh/agent`: accepted when the mesh is this root's name or an alias.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// `tx:` in circe.yaml.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TxConfig {
    /// This root's mesh name; default: the name of the folder that holds `.circe`.
    #[serde(default)]
    pub mesh: Option<String>,
    /// Other mesh names that mean this root (meshes a TX folder was imported from).
    #[serde(default)]
    pub aliases: Vec<String>,
}

impl TxConfig {
    /// Every mesh name checks the agent-name rule.
    pub fn check(&self) -> Result<()> {
        for m in self.mesh.iter().chain(&self.aliases) {
            crate::names::check_mesh(m).map_err(|e| {
                let hint = e.hint.clone().unwrap_or_default();
                Error::refused(format!("circe.yaml: tx: {}", e.message)).hint(hint)
            })?;
        }
        Ok(())
    }
}

/// Check a TX address against this root's mesh names (`meshes`: the name first, then the
/// aliases). `agent` and `all` pass; `mesh/agent` passes when `mesh` is one of `meshes`.
pub fn check_address(field: &str, addr: &str, meshes: &[String]) -> Result<()> {
    let Some((mesh, agent)) = addr.split_once('/') else { return Ok(()) };
    if meshes.iter().any(|m| m == mesh) {
        return Ok(());
    }
    let this = meshes.first().map_or_else(|| "(none set)".to_string(), |m| format!("`{m}`"));
    Err(Error::refused(format!(
        "{field}: `{addr}` names mesh `{mesh}`, which is not this root (its mesh is {this})"
    ))
    .detail("mesh", mesh.to_string())
    .hint(format!(
        "write the bare agent `{agent}` (no mesh), or add `{mesh}` to `tx: aliases:` in circe.yaml if it means this root"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meshes_decide() {
        let meshes = vec!["proj".to_string(), "core".to_string()];
        assert!(check_address("to", "brain", &meshes).is_ok());
        assert!(check_address("to", "core/brain", &meshes).is_ok());
        assert!(check_address("to", "proj/brain", &meshes).is_ok());
        let e = check_address("to", "other/brain", &meshes).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::Refused);
        assert!(e.message.contains("`other`") && e.message.contains("`proj`"), "{}", e.message);
        assert!(e.hint.unwrap().contains("tx: aliases"));
        assert!(check_address("to", "x/y", &[]).unwrap_err().message.contains("none set"));
        assert!(TxConfig { mesh: Some("Bad Name".into()), aliases: vec![] }.check().is_err());
    }
}
