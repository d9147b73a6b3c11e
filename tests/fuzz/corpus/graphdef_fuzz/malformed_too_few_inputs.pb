

xPlaceholder*
dtype0

nMulx*
T0