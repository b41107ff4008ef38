//! Open sessions of the gateway: one per key, each behind its own lock so turns of one
//! session run one at a time while different sessions run in parallel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use squidbot_core::agent::{Agent, AgentError};
use squidbot_core::session::Session;

/// A session shared between requests.
pub type SharedSession = Arc<tokio::sync::Mutex<Session>>;

/// Sessions opened so far.
pub struct Sessions {
    agent: Arc<Agent>,
    open: Mutex<HashMap<String, SharedSession>>,
}

impl Sessions {
    /// None open yet.
    pub fn new(agent: Arc<Agent>) -> Self {
        Self { agent, open: Mutex::new(HashMap::new()) }
    }

    /// How many are open.
    pub fn open_count(&self) -> usize {
        self.open.lock().map_or(0, |open| open.len())
    }

    /// The session for `key`, loading it from the store on first use.
    pub async fn get(&self, key: &str) -> Result<SharedSession, AgentError> {
        if let Some(session) = self.open.lock().ok().and_then(|open| open.get(key).cloned()) {
            return Ok(session);
        }
        let (session, warnings) = self.agent.open_session(key).await?;
        for warning in warnings {
            tracing::warn!(session = key, "{warning}");
        }
        let shared = Arc::new(tokio::sync::Mutex::new(session));
        match self.open.lock() {
            Ok(mut open) => Ok(open.entry(key.to_owned()).or_insert(shared).clone()),
            Err(_) => Ok(shared),
        }
    }
}
