//! kill
