
2
xPlaceholder*
shape
:*
dtype0
5
eEinsumx*
N*
T0*
equationii->i