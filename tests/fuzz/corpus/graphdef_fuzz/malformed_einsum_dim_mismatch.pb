
2
xPlaceholder*
shape
:*
dtype0
2
yPlaceholder*
shape
:*
dtype0
<
eEinsumxy*
N*
T0*
equation	ij,jk->ik