//! iofail
