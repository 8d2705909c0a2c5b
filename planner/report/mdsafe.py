"""One escaping function for text that comes from a user's file (workload and instance-type names,
overlay `source` strings, unknown keys, messages that quote them) on its way into GitHub Markdown:
no raw HTML, no table-cell breaks, no @mentions, no links, no code-fence or code-span breakouts."""

from __future__ import annotations

import html
import re

# Markdown's inline punctuation that could start emphasis, a link, a code span, a cell or strikethrough
# (CommonMark 0.30 §2.4: any ASCII punctuation may be backslash-escaped).
_PUNCT = re.compile(r"([\\`*_\[\]|~])")
_MENTION = re.compile(r"@(?=[A-Za-z0-9_-])")  # GitHub links @user and @org/team
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto)(:)|\b(www)(\.)")  # GFM's autolink extension triggers
_ZWSP = "\u200b"  # zero-width space: breaks a mention or autolink without changing what a reader sees
_PLAIN = re.compile(r"[A-Za-z0-9._:/+=,()#%-]*")  # names safe inside a `code span` as they are


def md_text(value: object) -> str:
    """`value` as inert Markdown text on one line."""
    text = " ".join(str(value).splitlines())
    text = html.escape(text, quote=False)
    text = _PUNCT.sub(r"\\\1", text)
    text = _MENTION.sub("@" + _ZWSP, text)
    return _AUTOLINK.sub(lambda m: (m.group(1) or m.group(3)) + _ZWSP + (m.group(2) or m.group(4)), text)


def md_code(value: object) -> str:
    """`value` set as code: a backtick span when it holds nothing Markdown or HTML reads, else an HTML
    <code> element around the escaped text (a code span cannot escape a backtick or, in a table, a pipe)."""
    text = str(value)
    if _PLAIN.fullmatch(text):
        return f"`{text}`"
    return f"<code>{md_text(text)}</code>"
