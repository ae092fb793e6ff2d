"""Every view of runs and decisions: the static HTML report (`html_report`, its views `html_views` and templates),
the plots (`plots`), the markdown tables (`markdown`), a comparison's files for a paper (`comparison_files`), a
finished run folder (`run_folder`), headless rendering of the report's pages (`headless`), an index report's lines
(`index_lines`), and the terminal rendering of one Decision (`terminal`)."""
