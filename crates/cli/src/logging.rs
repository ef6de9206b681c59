//! Logging set-up shared by `ringswitch` and `ringswitchd`.

/// Logs to stderr at the level in `RINGSWITCH_LOG` (error, warn, info,
/// debug, trace), else `default`. A plain level rather than a per-module
/// filter keeps the daemon's resident code small (no regex engine).
pub fn init(default: &str) {
    let level = std::env::var("RINGSWITCH_LOG")
        .ok()
        .and_then(|v| {
            v.trim()
                .parse::<tracing_subscriber::filter::LevelFilter>()
                .ok()
        })
        .unwrap_or_else(|| {
            default
                .parse()
                .unwrap_or(tracing_subscriber::filter::LevelFilter::INFO)
        });
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .try_init();
}
