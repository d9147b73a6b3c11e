

xPlaceholder*
dtype0

nNegxx*
T0