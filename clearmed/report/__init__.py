"""Showing runs and decisions: the static HTML report (`html_report`, its views, plots and templates), headless
rendering of its pages, and the terminal rendering of one Decision (`terminal`)."""
