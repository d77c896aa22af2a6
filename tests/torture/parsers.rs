//! parsers
