

nNegghost*
T0