//! The runner's `tracing` output: `-v` / `-vv` / `-vvv` or `RUST_LOG` (see `docs/tracing.md`).

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The filter for `verbose` (`-v` count) and the `RUST_LOG` value `rust_log`: `RUST_LOG` wins
/// when set (`target=level` directives, comma-separated, such as `eagle=debug`); else no `-v`
/// shows eagle's warnings (a corrupted cache entry), `-v` the launches, compiles and plan runs
/// with their durations, `-vv` every stage, dispatch and cache lookup, `-vvv` everything.
///
/// # Errors
/// The message for a `RUST_LOG` that is not a list of `target=level` directives.
pub fn filter(verbose: u8, rust_log: Option<&str>) -> Result<Targets, String> {
    if let Some(v) = rust_log.filter(|v| !v.trim().is_empty()) {
        return v.parse::<Targets>().map_err(|e| {
            format!("environment variable `RUST_LOG`: expected `target=level` directives such as `eagle=debug`, found `{v}` ({e})")
        });
    }
    let level = match verbose {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    Ok(Targets::new().with_target("eagle", level))
}

/// Installs the runner's subscriber: spans and events of the chosen levels on standard error,
/// one line each, a span's line when it closes with its busy and idle time.
///
/// # Errors
/// As [`filter`].
pub fn init(verbose: u8) -> Result<(), String> {
    let targets = filter(verbose, std::env::var("RUST_LOG").ok().as_deref())?;
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_span_events(FmtSpan::CLOSE)
        .with_filter(targets);
    // A second call (a test harness that already installed one) keeps the first.
    let _ = tracing_subscriber::registry().with(layer).try_init();
    Ok(())
}
