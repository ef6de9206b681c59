//! The live web view at `/`: a page, its script and its style, compiled
//! into the binary (no build step, nothing loaded from elsewhere: the
//! responses forbid it with a Content-Security-Policy). The page polls
//! `/api/state` (a [`super::snapshot::Snapshot`] as JSON) every second and
//! computes rates itself, from counter differences over the snapshots' own
//! clock (`at_ns`), keeping five minutes of them for its plots.

/// Embeds a file in a section of its own, `.rodata.ringswitch_web`, which
/// ringswitchd's link script puts after its code for features an idle
/// daemon does not run (crates/cli/link/ringswitchd.ld): among the data a
/// daemon reads, the page would be mapped with every 64 KiB window around
/// it, and count in the daemon's resident memory.
macro_rules! asset {
    ($name:ident, $file:literal) => {
        #[link_section = ".rodata.ringswitch_web"]
        static $name: [u8; include_bytes!($file).len()] = *include_bytes!($file);
    };
}

asset!(INDEX_HTML, "assets/index.html");
asset!(APP_JS, "assets/app.js");
asset!(STYLE_CSS, "assets/style.css");

/// The embedded file at `path`, with its content type.
pub fn asset(path: &str) -> Option<(&'static str, &'static [u8])> {
    match path {
        "/" | "/index.html" => Some(("text/html; charset=utf-8", &INDEX_HTML)),
        "/app.js" => Some(("text/javascript; charset=utf-8", &APP_JS)),
        "/style.css" => Some(("text/css; charset=utf-8", &STYLE_CSS)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_files() {
        let (ty, page) = asset("/").unwrap();
        assert!(ty.starts_with("text/html"));
        let page = std::str::from_utf8(page).unwrap();
        assert!(page.contains("src=\"app.js\"") && page.contains("href=\"style.css\""));
        for (_, body) in ["/", "/app.js", "/style.css"].map(|p| asset(p).unwrap()) {
            let body = std::str::from_utf8(body).unwrap();
            assert!(!body.contains("http://") && !body.contains("https://"));
        }
        assert!(asset("/../Cargo.toml").is_none());
    }
}
