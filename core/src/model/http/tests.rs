use super::*;
use std::io::{Read, Write};
use std::net::TcpListener;

/// An HTTP server on 127.0.0.1 that answers the n-th connection with the n-th scripted reply
/// (status, body, delay ms), each connection on its own thread; returns the requests it saw.
pub fn serve(replies: Vec<(u16, String, u64)>) -> (String, thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://127.0.0.1:{}/v1", listener.local_addr().expect("addr").port());
    let h = thread::spawn(move || {
        let mut workers = Vec::new();
        for (status, body, delay_ms) in replies {
            let Ok((mut s, _)) = listener.accept() else { break };
            workers.push(thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                let mut req = String::new();
                loop {
                    let n = s.read(&mut buf).unwrap_or(0);
                    req.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if n == 0 || complete(&req) {
                        break;
                    }
                }
                thread::sleep(Duration::from_millis(delay_ms));
                let _ = write!(
                    s,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                req
            }));
        }
        workers.into_iter().filter_map(|w| w.join().ok()).collect()
    });
    (url, h)
}

/// Whether a request has its headers and as many body bytes as Content-Length says.
fn complete(req: &str) -> bool {
    let Some((head, body)) = req.split_once("\r\n\r\n") else { return false };
    let len = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
        .unwrap_or(0);
    body.len() >= len
}

pub fn endpoint(service: Service, url: String) -> Endpoint {
    Endpoint {
        service,
        base_url: url,
        model: Some("m".into()),
        api_key: Some(Secret::new("sk-test-secret")),
        timeout: Duration::from_secs(5),
        max_retries: 2,
        max_body: 1 << 20,
        grammar: crate::grammar::Mode::Off,
    }
}

#[test]
fn retries_5xx_then_succeeds() {
    let (url, h) = serve(vec![(503, "{}".into(), 0), (200, "{\"ok\":1}".into(), 0)]);
    let r = post_json(&endpoint(Service::Llm, url), "{}").expect("reply");
    assert_eq!((r.text.as_str(), r.attempts), ("{\"ok\":1}", 2));
    h.join().expect("server");
}

#[test]
fn gives_up_after_retries() {
    let (url, h) = serve(vec![(500, "boom".into(), 0), (500, "boom".into(), 0), (500, "boom".into(), 0)]);
    let e = post_json(&endpoint(Service::Llm, url), "{}").expect_err("must fail");
    assert!(matches!(e.kind, ErrorKind::Server { status: 500, attempts: 3, .. }), "{e:?}");
    assert_eq!(e.sqlstate(), SqlState::ConnectionFailure);
    h.join().expect("server");
}

#[test]
fn auth_error_never_shows_key() {
    let (url, h) = serve(vec![(401, "{\"error\":\"bad key sk-test-secret\"}".into(), 0)]);
    let ep = endpoint(Service::Embeddings, url);
    let e = post_json(&ep, "{}").expect_err("must fail");
    let r = e.report(ep.api_key.as_ref());
    assert_eq!(r.sqlstate, SqlState::InvalidAuthorization);
    assert!(r.message.starts_with("embedding endpoint"));
    assert!(r.hint.as_deref().unwrap_or("").contains("nl2sql.embedding_api_key"));
    assert!(!format!("{r:?}").contains("sk-test-secret"), "{r:?}");
    h.join().expect("server");
}

#[test]
fn refused_connection() {
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let e = post_json(&endpoint(Service::Llm, format!("http://127.0.0.1:{port}/v1")), "{}").expect_err("refused");
    assert!(matches!(&e.kind, ErrorKind::Connect { reason, .. } if reason == "connection refused"), "{e:?}");
    assert_eq!(e.sqlstate().code(), "08001");
    assert_eq!(e.detail().as_deref(), Some("Connection refused."));
}

#[test]
fn slow_server_times_out_in_bounded_time() {
    let (url, _h) = serve(vec![(200, "{}".into(), 3000)]);
    let mut ep = endpoint(Service::Llm, url);
    ep.timeout = Duration::from_millis(300);
    let t = Instant::now();
    let e = post_json(&ep, "{}").expect_err("timeout");
    assert!(matches!(e.kind, ErrorKind::Timeout { ms: 300, .. }), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn redirects_are_not_followed() {
    let (url, h) = serve(vec![(307, "".into(), 0)]);
    let e = post_json(&endpoint(Service::Llm, url), "{}").expect_err("redirect");
    assert!(matches!(e.kind, ErrorKind::Http { status: 307, .. }), "{e:?}");
    assert_eq!(h.join().expect("server").len(), 1);
}

#[test]
fn bad_url_scheme() {
    let e = post_json(&endpoint(Service::Llm, "ftp://x".into()), "{}").expect_err("bad url");
    assert!(matches!(e.kind, ErrorKind::BadUrl { .. }));
}

#[test]
fn poll_runs_while_waiting_and_may_abort() {
    let t = Instant::now();
    let mut polls = 0;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let job: Box<dyn FnOnce() -> u32 + Send> = Box::new(|| {
            thread::sleep(Duration::from_secs(3));
            1
        });
        run_concurrently(vec![job], &mut || {
            polls += 1;
            if polls == 20 {
                panic!("cancel");
            }
        }, || 0)
    }));
    assert!(r.is_err());
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

#[test]
fn jobs_run_concurrently_in_order() {
    let t = Instant::now();
    let jobs: Vec<Box<dyn FnOnce() -> usize + Send>> = (0..3)
        .map(|i| -> Box<dyn FnOnce() -> usize + Send> {
            Box::new(move || {
                thread::sleep(Duration::from_millis(400));
                i
            })
        })
        .collect();
    assert_eq!(run_concurrently(jobs, &mut || {}, || 99), vec![0, 1, 2]);
    assert!(t.elapsed() < Duration::from_millis(1000), "{:?}", t.elapsed());
}

#[test]
fn urls() {
    let ep = endpoint(Service::Llm, "http://u:p@127.0.0.1:8080/v1/".into());
    assert_eq!(ep.url(), "http://u:p@127.0.0.1:8080/v1/chat/completions");
    assert_eq!(ep.display_url(), "http://127.0.0.1:8080/v1/chat/completions");
    assert!(is_loopback(&ep.url()));
    assert!(!is_loopback("https://api.openai.com/v1"));
    assert!(is_loopback("http://[::1]:8080/v1"));
    let full = endpoint(Service::Llm, "http://h/v1/chat/completions".into());
    assert_eq!(full.url(), "http://h/v1/chat/completions");
    assert_eq!(endpoint(Service::Embeddings, "http://h/v1".into()).url(), "http://h/v1/embeddings");
}

#[test]
fn a_url_carrying_credentials_or_a_query_is_named() {
    for ok in ["http://127.0.0.1:8080/v1", "https://api.example.com/v1/", "http://[::1]:8080/v1/chat/completions", "http://host"] {
        assert_eq!(super::url_carries(ok), None, "{ok}");
    }
    for (bad, what) in [
        ("http://user:secret@host/v1", "a user name or password"),
        ("http://user@host", "a user name or password"),
        ("https://host/v1?key=sk-123", "a query string or fragment"),
        ("https://host/v1#frag", "a query string or fragment"),
        ("https://host?x=a@b", "a query string or fragment"),
    ] {
        assert_eq!(super::url_carries(bad), Some(what), "{bad}");
    }
}

/// The signals of the calling thread's mask, 1 to 31.
#[cfg(unix)]
fn blocked_signals() -> Vec<i32> {
    // SAFETY: reads this thread's mask into a zeroed set; sigismember on that set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
        (1..32).filter(|&s| libc::sigismember(&set, s) == 1).collect()
    }
}

#[cfg(unix)]
#[test]
fn helper_threads_start_with_every_signal_blocked_and_leave_the_callers_mask_alone() {
    let before = blocked_signals();
    let inside = spawn_without_signals("nl2sql-test".into(), blocked_signals).expect("spawned").join().expect("joined");
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGALRM, libc::SIGUSR1, libc::SIGUSR2, libc::SIGQUIT] {
        assert!(inside.contains(&s), "signal {s} not blocked in the helper thread: {inside:?}");
    }
    assert_eq!(blocked_signals(), before, "the caller's mask changed");
    assert!(!before.contains(&libc::SIGINT), "the test thread itself blocks SIGINT: {before:?}");
}
