//! `Workspace`: an opened root with its configuration, registry and agents: what every
//! command above the store works with.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::names;
use crate::registry::Registry;
use crate::store::{Mailbox, Store, find_root, root_at};

/// `AGENTS/<name>/agent.yaml`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentFile {
    pub role: String,
}

pub struct Workspace {
    pub store: Store,
    pub config: Config,
    pub registry: Registry,
    /// agent name -> role, loaded on first use of `agents()` (most commands need one or two
    /// agents' roles, which `role_of` reads one file each for).
    agents: OnceCell<BTreeMap<String, String>>,
    roles: RefCell<HashMap<String, Option<String>>>,
}

impl Workspace {
    /// Open the root named by `--root`/`CIRCE_ROOT`, else the one above the current folder.
    pub fn open(explicit: Option<&Path>) -> Result<Workspace> {
        let root = if let Some(p) = explicit {
            root_at(p).ok_or_else(|| {
                Error::usage(format!(
                    "{} is not a circe root (no circe.yaml in it or in its .circe/)",
                    p.display()
                ))
                .hint("run `circe init` there, or fix --root / CIRCE_ROOT")
            })?
        } else {
            let cwd = std::env::current_dir().map_err(|e| Error::io("cannot read", ".", e))?;
            find_root(&cwd).ok_or_else(|| {
                Error::usage("not inside a circe root (no .circe/circe.yaml here or above)")
                    .hint("run `circe init` to make one here, or pass --root")
            })?
        };
        let store = Store::open(&root)?;
        let config = Config::parse(&store.read_config()?)?;
        let store = store.with_durability(config.durability()?);
        let registry = Registry::from_config(&config.registry)?;
        Ok(Workspace {
            store,
            config,
            registry,
            agents: OnceCell::new(),
            roles: RefCell::default(),
        })
    }

    /// Every agent and its role, sorted by name.
    pub fn agents(&self) -> &BTreeMap<String, String> {
        self.agents.get_or_init(|| {
            let mut agents = BTreeMap::new();
            for (name, text) in self.store.list_agents().unwrap_or_default() {
                if names::check_agent(&name).is_err() {
                    continue;
                }
                if let Ok(a) = crate::yaml::from_str::<AgentFile>(&text) {
                    agents.insert(name, a.role);
                }
            }
            agents
        })
    }

    /// The role of `agent`, or `None` when there is no such agent.
    pub fn role_of(&self, agent: &str) -> Option<String> {
        if let Some(all) = self.agents.get() {
            return all.get(agent).cloned();
        }
        if names::check_agent(agent).is_err() {
            return None;
        }
        if let Some(known) = self.roles.borrow().get(agent) {
            return known.clone();
        }
        let role = self
            .store
            .read_agent(agent)
            .ok()
            .flatten()
            .and_then(|t| crate::yaml::from_str::<AgentFile>(&t).ok())
            .map(|a| a.role);
        self.roles.borrow_mut().insert(agent.to_string(), role.clone());
        role
    }

    pub fn is_agent(&self, name: &str) -> bool {
        self.role_of(name).is_some()
    }

    /// The acting agent: it must exist.
    pub fn agent(&self, name: Option<&str>) -> Result<(String, String)> {
        let name = name.ok_or_else(|| {
            Error::usage("no acting agent").hint("pass --agent NAME or set CIRCE_AGENT")
        })?;
        names::check_agent(name)?;
        let role = self.role_of(name).ok_or_else(|| {
            Error::not_found(format!("no agent `{name}` in this root"))
                .hint("`circe agent list` shows them; `circe agent add` makes one")
        })?;
        Ok((name.to_string(), role))
    }

    /// Is `agent` a coordinator (role coordinator or rooster, the human)?
    pub fn is_coordinator(&self, agent: &str) -> bool {
        matches!(self.role_of(agent).as_deref(), Some("coordinator" | "rooster"))
    }

    /// Every box a message can lie in: NEW_MESSAGES, each agent's INBOX and WORKSPACE, LOGS.
    pub fn all_boxes(&self) -> Vec<Mailbox> {
        let mut v = vec![Mailbox::NewMessages];
        for a in self.agents().keys() {
            v.push(Mailbox::Inbox(a.clone()));
            v.push(Mailbox::Workspace(a.clone()));
        }
        v.push(Mailbox::Logs);
        v
    }

    /// Agents with role `role`, sorted.
    pub fn agents_with_role(&self, role: &str) -> Vec<String> {
        self.agents().iter().filter(|(_, r)| r.as_str() == role).map(|(a, _)| a.clone()).collect()
    }
}
