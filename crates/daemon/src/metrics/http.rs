//! The little of HTTP/1.1 the metrics listener speaks: a request head
//! parsed from the bytes read so far (GET and HEAD only, never a body),
//! and a response written whole, with its length. Pure functions over
//! bytes: the listener (`super`) owns the sockets, the bounds and the
//! clock.

/// Most bytes of a request head (request line and header lines, with the
/// blank line that ends them): a longer one is answered 431 and closed.
/// Prometheus's and browsers' requests are under 1 KiB.
pub const MAX_HEAD: usize = 8 * 1024;

/// Most header lines in a request head.
pub const MAX_HEADERS: usize = 64;

/// The methods served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD: GET's headers without its body.
    Head,
}

/// A request head, as far as the listener cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// GET or HEAD.
    pub method: Method,
    /// The path, without the query (`/metrics`).
    pub path: String,
    /// Whether the connection stays open after the response (HTTP/1.1
    /// unless `Connection: close`; HTTP/1.0 only with `keep-alive`).
    pub keep_alive: bool,
    /// The client takes the OpenMetrics text format (its `Accept` names
    /// `application/openmetrics-text`, as Prometheus's scrapes do).
    pub openmetrics: bool,
}

/// Why a request is refused; each is answered with its status and closed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// Not an HTTP request line or header.
    #[error("this is not an HTTP/1.x request")]
    Malformed,
    /// A method other than GET and HEAD.
    #[error("method {0} is not served here: only GET and HEAD")]
    Method(String),
    /// A request with a body (`Content-Length` other than 0, or
    /// `Transfer-Encoding`).
    #[error("requests with a body are not served here")]
    Body,
    /// A head longer than [`MAX_HEAD`] or with more than [`MAX_HEADERS`]
    /// lines.
    #[error("the request head is longer than {MAX_HEAD} bytes or {MAX_HEADERS} lines")]
    HeadTooLarge,
    /// HTTP/2 or another version.
    #[error("only HTTP/1.0 and HTTP/1.1 are served here")]
    Version,
}

impl HttpError {
    /// The status that answers it.
    pub fn status(&self) -> Status {
        match self {
            HttpError::Malformed => Status::BadRequest,
            HttpError::Method(_) => Status::MethodNotAllowed,
            HttpError::Body => Status::ContentTooLarge,
            HttpError::HeadTooLarge => Status::HeadersTooLarge,
            HttpError::Version => Status::VersionNotSupported,
        }
    }
}

/// The statuses the listener answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// 200.
    Ok,
    /// 400.
    BadRequest,
    /// 404.
    NotFound,
    /// 405.
    MethodNotAllowed,
    /// 413.
    ContentTooLarge,
    /// 431.
    HeadersTooLarge,
    /// 503: every connection slot is taken.
    Unavailable,
    /// 505.
    VersionNotSupported,
}

impl Status {
    /// Every status, in the order of [`Status::index`].
    pub const ALL: [Status; 8] = [
        Status::Ok,
        Status::BadRequest,
        Status::NotFound,
        Status::MethodNotAllowed,
        Status::ContentTooLarge,
        Status::HeadersTooLarge,
        Status::Unavailable,
        Status::VersionNotSupported,
    ];

    /// The status code.
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::ContentTooLarge => 413,
            Status::HeadersTooLarge => 431,
            Status::Unavailable => 503,
            Status::VersionNotSupported => 505,
        }
    }

    /// Its position in [`Status::ALL`] (a counter per status).
    pub fn index(self) -> usize {
        Status::ALL.iter().position(|s| *s == self).unwrap_or(0)
    }

    fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::ContentTooLarge => "Content Too Large",
            Status::HeadersTooLarge => "Request Header Fields Too Large",
            Status::Unavailable => "Service Unavailable",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}

/// Where the head ends: the index just past the blank line (CRLF CRLF,
/// or bare LFs from a hand-typed request), if it is in `buf`.
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(nl) = buf[i..].iter().position(|&b| b == b'\n') {
        let at = i + nl;
        let rest = &buf[at + 1..];
        if rest.first() == Some(&b'\n') {
            return Some(at + 2);
        }
        if rest.starts_with(b"\r\n") {
            return Some(at + 3);
        }
        i = at + 1;
    }
    None
}

/// Parses the request head at the start of `buf`: `Ok(None)` while it is
/// incomplete (read more), else the request and how many bytes it took
/// (what follows is the next, pipelined, request). Nothing is read beyond
/// the head: a request that announces a body is refused.
pub fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, HttpError> {
    let Some(end) = head_end(buf) else {
        return if buf.len() >= MAX_HEAD {
            Err(HttpError::HeadTooLarge)
        } else {
            Ok(None)
        };
    };
    if end > MAX_HEAD {
        return Err(HttpError::HeadTooLarge);
    }
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| HttpError::Malformed)?;
    let mut lines = head.lines().map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().ok_or(HttpError::Malformed)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::Malformed);
    };
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        m if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) => {
            return Err(HttpError::Method(m.to_owned()))
        }
        _ => return Err(HttpError::Malformed),
    };
    let mut keep_alive = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v if v.starts_with("HTTP/") => return Err(HttpError::Version),
        _ => return Err(HttpError::Malformed),
    };
    if !target.starts_with('/') {
        return Err(HttpError::Malformed);
    }
    let path = target.split(['?', '#']).next().unwrap_or(target).to_owned();
    let mut openmetrics = false;
    let mut headers = 0;
    for line in lines.take_while(|l| !l.is_empty()) {
        headers += 1;
        if headers > MAX_HEADERS {
            return Err(HttpError::HeadTooLarge);
        }
        let (name, value) = line.split_once(':').ok_or(HttpError::Malformed)?;
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(HttpError::Malformed);
        }
        let value = value.trim();
        let has = |token: &str| {
            value
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case(token))
        };
        if name.eq_ignore_ascii_case("content-length") {
            match value.parse::<u64>() {
                Ok(0) => {}
                Ok(_) => return Err(HttpError::Body),
                Err(_) => return Err(HttpError::Malformed),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(HttpError::Body);
        } else if name.eq_ignore_ascii_case("connection") {
            if has("close") {
                keep_alive = false;
            } else if has("keep-alive") {
                keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("accept") {
            openmetrics |= value
                .to_ascii_lowercase()
                .contains("application/openmetrics-text");
        }
    }
    Ok(Some((
        Request {
            method,
            path,
            keep_alive,
            openmetrics,
        },
        end,
    )))
}

/// A response body: the embedded assets are never copied.
#[derive(Debug)]
pub enum Body {
    /// Compiled into the binary.
    Static(&'static [u8]),
    /// Made for this request.
    Owned(Vec<u8>),
    /// Made for several requests (a rendering of one snapshot).
    Shared(std::sync::Arc<[u8]>),
}

impl Body {
    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Body::Static(b) => b,
            Body::Owned(v) => v,
            Body::Shared(b) => b,
        }
    }
}

/// A response.
#[derive(Debug)]
pub struct Response {
    /// Status.
    pub status: Status,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Body (also for HEAD: its length is sent, not its bytes).
    pub body: Body,
}

impl Response {
    /// A 200 with `body`.
    pub fn ok(content_type: &'static str, body: Body) -> Response {
        Response {
            status: Status::Ok,
            content_type,
            body,
        }
    }

    /// A refusal with a one-line plain message.
    pub fn error(status: Status, message: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Body::Owned(format!("{message}\n").into_bytes()),
        }
    }

    /// The response's bytes, appended to `out`: the head, then the body
    /// unless `head_only`. Nothing is cached (every body is a reading of
    /// now, or small); the page may load nothing from elsewhere.
    pub fn write(&self, head_only: bool, keep_alive: bool, out: &mut Vec<u8>) {
        use std::io::Write;
        let body = self.body.bytes();
        // Writing into a Vec cannot fail.
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
             Content-Security-Policy: default-src 'self'; img-src 'self' data:; \
             frame-ancestors 'none'\r\nConnection: {}\r\n",
            self.status.code(),
            self.status.reason(),
            self.content_type,
            body.len(),
            if keep_alive { "keep-alive" } else { "close" },
        );
        if self.status == Status::MethodNotAllowed {
            out.extend_from_slice(b"Allow: GET, HEAD\r\n");
        }
        if self.status == Status::Unavailable {
            out.extend_from_slice(b"Retry-After: 1\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !head_only {
            out.extend_from_slice(body);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(s: &str) -> Result<Option<(Request, usize)>, HttpError> {
        parse(s.as_bytes())
    }

    #[test]
    fn a_scrape_and_a_page_load() {
        let s = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\nGET /";
        let (r, n) = req(s).unwrap().unwrap();
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.path, "/metrics");
        assert!(r.keep_alive && r.openmetrics);
        assert_eq!(&s[n..], "GET /", "the pipelined rest is left");
        let (r, _) = req("HEAD /api/state?x=1 HTTP/1.0\n\n").unwrap().unwrap();
        assert_eq!((r.method, r.path.as_str()), (Method::Head, "/api/state"));
        assert!(!r.keep_alive && !r.openmetrics);
        let (r, _) = req("GET / HTTP/1.1\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!r.keep_alive);
    }

    #[test]
    fn incomplete_heads_wait_for_more_up_to_the_bound() {
        assert_eq!(req("GET /metrics HTTP/1.1\r\nHost: x\r\n"), Ok(None));
        assert_eq!(req(""), Ok(None));
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(req(&long), Err(HttpError::HeadTooLarge));
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: y\r\n")).collect();
        assert_eq!(
            req(&format!("GET / HTTP/1.1\r\n{many}\r\n")),
            Err(HttpError::HeadTooLarge)
        );
    }

    #[test]
    fn refusals_say_why_with_their_status() {
        let cases = [
            ("POST /metrics HTTP/1.1\r\n\r\n", Status::MethodNotAllowed),
            (
                "GET / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
                Status::ContentTooLarge,
            ),
            (
                "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                Status::ContentTooLarge,
            ),
            ("GET / HTTP/2.0\r\n\r\n", Status::VersionNotSupported),
            ("GET /  HTTP/1.1\r\n\r\n", Status::BadRequest),
            ("get / HTTP/1.1\r\n\r\n", Status::BadRequest),
            ("GET metrics HTTP/1.1\r\n\r\n", Status::BadRequest),
            ("GET / HTTP/1.1\r\nno colon\r\n\r\n", Status::BadRequest),
            ("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", Status::BadRequest),
            ("\u{0}\u{1}\n\n", Status::BadRequest),
        ];
        for (s, status) in cases {
            let e = req(s).unwrap_err();
            assert_eq!(e.status(), status, "{s:?}: {e}");
        }
        assert!(parse(b"GET /\xff HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn responses_carry_their_length_and_head_omits_the_body() {
        let r = Response::ok("text/plain", Body::Static(b"hello"));
        let mut out = Vec::new();
        r.write(false, true, &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("HTTP/1.1 200 OK\r\n"), "{s}");
        assert!(s.contains("Content-Length: 5\r\n") && s.contains("Connection: keep-alive"));
        assert!(s.ends_with("\r\n\r\nhello"));
        let mut out = Vec::new();
        r.write(true, false, &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("Content-Length: 5\r\n") && s.ends_with("\r\n\r\n"));
        let mut out = Vec::new();
        Response::error(Status::MethodNotAllowed, "no").write(false, false, &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("HTTP/1.1 405 ") && s.contains("Allow: GET, HEAD"));
        for s in Status::ALL {
            assert_eq!(Status::ALL[s.index()], s);
        }
    }
}
