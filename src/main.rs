//! The `circe` binary: parse, run, exit. Everything else lives in the library.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(circe::cli::main())
}
