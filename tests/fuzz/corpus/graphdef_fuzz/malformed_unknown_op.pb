

xPlaceholder*
dtype0

fancyFancyOpx*
T0