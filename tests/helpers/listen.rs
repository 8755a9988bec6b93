//! A way in for the tests that another user can run (`setpriv --reuid=65534 … lnk-test-listen
//! <socket> <log>`): listens on `<socket>`, and for each connection appends the line it reads
//! to `<log>` and answers `result`. It ends by itself after two minutes.
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const LIFETIME: Duration = Duration::from_secs(120);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, log] = args.as_slice() else {
        eprintln!("usage: lnk-test-listen <socket> <log>");
        return ExitCode::from(2);
    };
    let listener = match UnixListener::bind(socket) {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("lnk-test-listen: binding {socket}: {err}");
            return ExitCode::from(1);
        }
    };
    if listener.set_nonblocking(true).is_err() {
        return ExitCode::from(1);
    }
    let end = Instant::now() + LIFETIME;
    while Instant::now() < end {
        let Ok((stream, _)) = listener.accept() else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut line = String::new();
        if BufReader::new(&stream).read_line(&mut line).is_err() {
            continue;
        }
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = file.write_all(line.as_bytes());
        }
        let _ = (&stream).write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    }
    ExitCode::SUCCESS
}
