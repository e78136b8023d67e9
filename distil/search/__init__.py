"""`distil search`: a multi-objective search over students on one cached teacher, each trial a table cell."""
