//! The runner's `tracing` output: `-v` / `-vv` / `-vvv` or `RUST_LOG` (see `docs/tracing.md`).

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The filter for `verbose` (`-v` count) and the `RUST_LOG` value `rust_log`: `RUST_LOG` wins
/// when set (`target=level` directives, comma-separated, such as `eagle=debug`); else no `-v`
/// shows eagle's warnings (a corrupted cache entry), `-v` the launches, compiles and plan runs
/// with their durations, `-vv` every stage, dispatch and cache lookup, `-vvv` the trace level.
///
/// # Errors
/// The message for a `RUST_LOG` that is not a list of `target=level` directives.
pub fn filter(verbose: u8, rust_log: Option<&str>) -> Result<Targets, String> {
    if let Some(v) = rust_log.filter(|v| !v.trim().is_empty()) {
        let bad = |why: String| {
            format!("environment variable `RUST_LOG`: expected `target=level` directives such as `eagle=debug`, found `{v}` ({why})")
        };
        // A target is a module path (`eagle`, `my_crate::io`); `tracing_subscriber` takes any
        // text, so `[` would quietly match nothing.
        for d in v.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let target = d.split_once('=').map_or(d, |(t, _)| t);
            if !target
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '-')
            {
                return Err(bad(format!("`{target}` is not a target")));
            }
        }
        return v.parse::<Targets>().map_err(|e| bad(e.to_string()));
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

#[cfg(test)]
mod tests {
    use super::filter;

    #[test]
    fn rust_log_takes_target_level_directives_and_refuses_the_rest() {
        for ok in [
            "eagle=debug",
            "eagle=info,my_crate::io=trace",
            "debug",
            "=debug",
            " ",
        ] {
            assert!(filter(0, Some(ok)).is_ok(), "{ok}");
        }
        for bad in ["[", "eagle=loud", "eagle{x}=debug", "garbage==="] {
            let e = filter(0, Some(bad)).unwrap_err();
            assert!(
                e.starts_with("environment variable `RUST_LOG`"),
                "{bad}: {e}"
            );
        }
    }
}
