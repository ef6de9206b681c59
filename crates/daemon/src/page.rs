//! Listings in pages: a `page` request returns the entries of a listing
//! that sort after a cursor, as many as fit in [`PAGE_BYTES`], so a reply
//! always fits in one message however many ports there are.
//!
//! The cursor is an entry's name (a MAC address for `macs`), and entries
//! sort in the order the listing documents (switches by name, each
//! switch's ports by port name, then the pipes), so a port added or removed
//! between two pages neither repeats nor hides another one.

use ringswitch_control::proto::{ErrorCode, ErrorReply, PAGE_BYTES};
use serde_json::Value;

/// The sort key of an entry's name: switch ports (`sw:port`) by switch,
/// then port; then pipe ends (`base{id`, `base}id`) by base, id and end;
/// anything else (switch names, MAC addresses) by itself.
fn key(name: &str) -> (u8, &str, &str, &str) {
    if let Some(i) = name.find([':', '{', '}']) {
        let (a, rest) = name.split_at(i);
        if let Some(port) = rest.strip_prefix(':') {
            return (0, a, port, "");
        }
        // The separator is one ASCII byte.
        let (end, id) = rest.split_at(1);
        return (1, a, id, end);
    }
    (2, name, "", "")
}

/// The name an entry is paged by.
fn name_of(v: &Value) -> &str {
    v.get("name")
        .or_else(|| v.get("mac"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The page of `listing` (a JSON array) after `after`: the entries, and
/// the cursor of the next page when entries remain.
pub fn page(listing: Value, after: &str) -> Result<(Value, Option<String>), ErrorReply> {
    let Value::Array(mut all) = listing else {
        return Ok((listing, None));
    };
    all.sort_by(|a, b| key(name_of(a)).cmp(&key(name_of(b))));
    let from = if after.is_empty() {
        0
    } else {
        let k = key(after);
        all.partition_point(|v| key(name_of(v)) <= k)
    };
    let mut bytes = 2; // the brackets
    let mut end = from;
    for v in &all[from..] {
        let n = serde_json::to_vec(v).map_or(0, |b| b.len()) + 1;
        if bytes + n > PAGE_BYTES {
            break;
        }
        bytes += n;
        end += 1;
    }
    if end == from && from < all.len() {
        return Err(ErrorReply::new(
            ErrorCode::Internal,
            format!(
                "entry {} of the listing is larger than a page",
                name_of(&all[from])
            ),
        ));
    }
    let next = (end < all.len()).then(|| name_of(&all[end - 1]).to_string());
    let entries: Vec<Value> = all.drain(from..end).collect();
    Ok((Value::Array(entries), next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pages_cover_every_entry_once_in_order() {
        let names: Vec<String> = (0..3000)
            .map(|i| format!("vale{}:port-with-a-long-name-{i:05}", i % 7))
            .chain((0..50).map(|i| format!("p{{{i}")))
            .chain((0..50).map(|i| format!("p}}{i}")))
            .collect();
        let listing = Value::Array(
            names
                .iter()
                .rev()
                .map(|n| json!({"name": n, "pad": "x".repeat(100)}))
                .collect(),
        );
        let mut after = String::new();
        let mut seen = Vec::new();
        loop {
            let (v, next) = page(listing.clone(), &after).unwrap();
            let v = v.as_array().unwrap().clone();
            assert!(serde_json::to_vec(&v).unwrap().len() <= PAGE_BYTES);
            seen.extend(v.iter().map(|e| name_of(e).to_string()));
            match next {
                Some(n) => after = n,
                None => break,
            }
        }
        assert_eq!(seen.len(), names.len());
        let mut sorted = seen.clone();
        sorted.sort_by(|a, b| key(a).cmp(&key(b)));
        assert_eq!(seen, sorted);
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        // Switch ports come before pipes, and a pipe's two ends together.
        assert!(seen[2999].starts_with("vale6:"));
        assert_eq!(seen[3000], "p{0");
        assert_eq!(seen[3001], "p}0");
    }

    #[test]
    fn a_cursor_that_went_away_still_moves_on() {
        let listing = json!([{"name": "vale0:a"}, {"name": "vale0:c"}]);
        let (v, next) = page(listing, "vale0:b").unwrap();
        assert_eq!(v, json!([{"name": "vale0:c"}]));
        assert_eq!(next, None);
    }
}
