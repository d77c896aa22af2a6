//! Test helpers: a local root seen both as a `Workspace` (to run operations) and as the
//! `LocalEngine` behind it (to look at its files and indexes).

use super::LocalEngine;
use super::root::Store;
use crate::config::DEFAULT_CONFIG;
use crate::engine::{RootSpec, Settings};
use crate::message::{Format, Message};
use crate::names::{AgentName, CheckName, TaskId};
use crate::task::Status;
use crate::workspace::Workspace;

pub fn id(s: &str) -> TaskId {
    TaskId::new(s).unwrap()
}

pub fn agent(s: &str) -> AgentName {
    AgentName::new(s).unwrap()
}

pub struct Root {
    pub eng: LocalEngine,
    pub ws: Workspace,
}

impl Root {
    /// A fresh root with one agent per role named (the agent has the role's name).
    pub fn new(roles: &[&str]) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::init(dir.path(), DEFAULT_CONFIG).unwrap();
        for role in roles {
            store.create_agent(&agent(role), role).unwrap();
        }
        let root = store.root().to_path_buf();
        let settings = Settings {
            lease: std::time::Duration::from_secs(1800),
            max_attempts: 3,
            limits: crate::message::Limits::DEFAULT,
        };
        let config = crate::config::Config::parse(
            &std::fs::read_to_string(root.join("circe.yaml")).unwrap(),
        )
        .unwrap();
        let eng = LocalEngine {
            store: Store::open(&root).unwrap(),
            settings,
            registry: crate::registry::Registry::from_config(&config.registry).unwrap(),
            passed_over: std::sync::Mutex::default(),
        };
        let ws = Workspace::open(&RootSpec::Path(root)).unwrap();
        (dir, Root { eng, ws })
    }

    pub fn open(&self, task: &str) {
        let mut m = Message::new(Format::Circe);
        m.to = Some("all".into());
        m.intent = Some("implement_feature".into());
        m.task_id = Some(task.into());
        crate::ops::send(&self.ws, &agent("coordinator"), m).unwrap();
    }

    pub fn claim(&self, who: &str, task: &str) {
        crate::ops::claim(&self.ws, &agent(who), "engineer", &id(task), None).unwrap();
    }

    pub fn start(&self, who: &str, task: &str) {
        crate::ops::set_status(&self.ws, &agent(who), &id(task), Status::InProgress, None, None)
            .unwrap();
    }

    pub fn check(&self, who: &str, task: &str, name: &str) {
        let name = CheckName::new(name).unwrap();
        crate::ops::check_set(&self.ws, &agent(who), &id(task), &name, true, None).unwrap();
    }

    pub fn release(&self, who: &str, task: &str) {
        let _ = crate::ops::release(&self.ws, &agent(who), &id(task), None, false, None).unwrap();
    }
}
