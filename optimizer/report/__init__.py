"""Reading a run after (or while) it works: terminal views (status, tree, show), the spend line, the
HTML report and the review server. Never changes a run's state; the only file it writes is
report.html or feedback.json on request. It is the last stage: it may import every other stage
and the shared modules, and nothing but the entry points imports it."""
