//! What each TX message type does beyond being delivered (reference 000, "Message Types").

/// The effect a message of a TX type has in circe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Semantics {
    /// `ask`, `ask-human`: the sender waits; circe records an open ask.
    OpensAsk,
    /// `ask-response`: must answer an open ask addressed to its sender; closes it.
    ClosesAsk,
    /// `task`: opens a task (its msg-id is the task id when it names none).
    OpensTask,
    /// `task-complete`: completes the task it replies to, through the checks' gate.
    CompletesTask,
    /// `prompt`: the recipient's current prompt.
    Prompt,
    /// `update` and every CIRCE intent: delivered, nothing awaited.
    Plain,
}

/// The semantics of `intent` (a TX type or a CIRCE intent).
pub fn semantics(intent: &str) -> Semantics {
    match intent {
        "ask" | "ask-human" => Semantics::OpensAsk,
        "ask-response" => Semantics::ClosesAsk,
        "task" => Semantics::OpensTask,
        "task-complete" => Semantics::CompletesTask,
        "prompt" => Semantics::Prompt,
        _ => Semantics::Plain,
    }
}

/// The TX types circe knows (reference 000's six and `ask-human` from TX's code).
pub const TX_TYPES: [&str; 7] =
    ["ask", "ask-human", "ask-response", "task", "task-complete", "update", "prompt"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tx_type_has_its_meaning() {
        let got: Vec<Semantics> = TX_TYPES.iter().map(|t| semantics(t)).collect();
        assert_eq!(
            got,
            [
                Semantics::OpensAsk,
                Semantics::OpensAsk,
                Semantics::ClosesAsk,
                Semantics::OpensTask,
                Semantics::CompletesTask,
                Semantics::Plain,
                Semantics::Prompt
            ]
        );
        assert_eq!(semantics("implement_feature"), Semantics::Plain);
        let reg = crate::registry::Registry::builtin();
        for t in TX_TYPES {
            assert!(reg.intent(t).is_some(), "{t} is in the registry");
        }
    }
}
