//! Redis's glob patterns (`KEYS`, `SCAN ... MATCH`), over bytes.
//!
//! `*` any run of bytes, `?` any one byte, `[abc]` one of a set, `[^abc]` none of it, `[a-z]`
//! a range (either order), `\x` the byte `x` itself. An unclosed `[` takes the rest of the
//! pattern as its set, as Redis's `stringmatchlen` does.

/// Whether `text` matches `pattern`.
///
/// Iterative with one backtrack point (the last `*`), so time is O(pattern × text) at worst
/// and there is no recursion for a hostile pattern to exhaust the stack with.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: its pattern position and the text it has eaten to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p + 1, t));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    let (hit, next) = class(pattern, p + 1, text[t]);
                    if hit {
                        p = next;
                        t += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == text[t] {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if c == text[t] {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        // A mismatch: let the last `*` eat one more byte, or fail.
        match star {
            Some((sp, st)) => {
                star = Some((sp, st + 1));
                p = sp;
                t = st + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Whether `c` is in the class starting at `pattern[at]` (just after `[`), and where the
/// pattern goes on after the class.
fn class(pattern: &[u8], mut at: usize, c: u8) -> (bool, usize) {
    let negate = pattern.get(at) == Some(&b'^');
    if negate {
        at += 1;
    }
    let mut hit = false;
    while at < pattern.len() && pattern[at] != b']' {
        if pattern[at] == b'\\' && at + 1 < pattern.len() {
            hit |= pattern[at + 1] == c;
            at += 2;
        } else if at + 2 < pattern.len() && pattern[at + 1] == b'-' && pattern[at + 2] != b']' {
            let (lo, hi) = (pattern[at].min(pattern[at + 2]), pattern[at].max(pattern[at + 2]));
            hit |= (lo..=hi).contains(&c);
            at += 3;
        } else {
            hit |= pattern[at] == c;
            at += 1;
        }
    }
    // Past the `]`, or at the end for an unclosed class.
    (hit != negate, (at + 1).min(pattern.len()))
}

/// The bytes every key matching `pattern` starts with: the pattern up to its first special
/// character, escapes resolved. A scan need only visit keys with this prefix.
pub fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'*' | b'?' | b'[' => break,
            b'\\' if i + 1 < pattern.len() => {
                out.push(pattern[i + 1]);
                i += 2;
            }
            // A trailing backslash matches itself.
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_examples() {
        // The examples of Redis's KEYS documentation.
        for (p, t, want) in [
            ("h?llo", "hello", true),
            ("h?llo", "hallo", true),
            ("h?llo", "hllo", false),
            ("h*llo", "hllo", true),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hello", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[b-a]llo", "hallo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("*", "", true),
            ("*", "anything", true),
            ("", "", true),
            ("", "a", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("user:*", "user:1", true),
            ("user:*", "users", false),
            ("[abc", "b", true),
            ("*a", "bbbbba", true),
        ] {
            assert_eq!(matches(p.as_bytes(), t.as_bytes()), want, "{p:?} against {t:?}");
        }
    }

    #[test]
    fn a_hostile_pattern_is_fast() {
        let pattern = "*a".repeat(50) + "b";
        let text = "a".repeat(10_000);
        assert!(!matches(pattern.as_bytes(), text.as_bytes()));
    }

    #[test]
    fn literal_prefixes() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"a\\*b?c"), b"a*b");
        assert_eq!(literal_prefix(b"*x"), b"");
        assert_eq!(literal_prefix(b"plain"), b"plain");
    }
}
