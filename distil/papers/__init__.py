"""What only one paper's table measures (Tang Table 2, Turc Table 1, Wu Tables 2 and 5)."""
