"""Issue 24: what a user's file says cannot forge the PR comment (HTML, cells, mentions, links, fences)."""

from planner.report.mdsafe import md_code, md_text


def test_quoted_cases_are_inert():
    assert md_text("evil.x|<img src=x>") == "evil.x\\|&lt;img src=x&gt;"
    assert md_text("@octocat") == "@\u200boctocat"
    assert md_text("</details><h1>") == "&lt;/details&gt;&lt;h1&gt;"
    assert md_text("<img src=https://e.com/a.png>") == "&lt;img src=https\u200b://e.com/a.png&gt;"
    assert md_text("a\n```\n### approved") == "a \\`\\`\\` ### approved"
    assert md_text("[click](http://x)") == "\\[click\\](http\u200b://x)"


def test_code_keeps_plain_names_and_escapes_the_rest():
    assert md_code("p4de.24xlarge") == "`p4de.24xlarge`"
    assert md_code("evil.x|<img src=x>") == "<code>evil.x\\|&lt;img src=x&gt;</code>"
    assert md_code("a`b") == "<code>a\\`b</code>"
