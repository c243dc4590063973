"""fltutor: notebook-first tutorials on personalized, fair and private federated learning.

Modules follow the data: data -> partition -> models/layers/ibp -> scenarios -> engine ->
aggregators -> methods -> federation -> metrics -> plots. Each imports only modules to its
left; paper_tables holds the papers' printed numbers and imports nothing.
"""
__version__ = "0.2.0"
