"""Reading a run after (or while) it works: terminal views, the HTML report, the review server.
Never changes a run's state; the only file it writes is report.html or feedback.json on request."""
