//! The intent registry: roles, intents, and who may send what to whom.
