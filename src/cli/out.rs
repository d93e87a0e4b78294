//! Output that never panics. `println!` and `eprintln!` panic when their stream is
//! closed (`tensorfit plan | head`, `tensorfit train 2>&1 | true`); these macros drop the
//! text instead, so a closed terminal or pipe loses words, never the run.

/// `println!` that ignores a closed stdout.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `print!` that ignores a closed stdout.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

/// `eprintln!` that ignores a closed stderr.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// `eprint!` that ignores a closed stderr.
macro_rules! err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($t)*);
    }};
}
