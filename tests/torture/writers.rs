//! writers
