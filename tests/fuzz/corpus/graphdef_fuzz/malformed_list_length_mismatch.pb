

xPlaceholder*
dtype0
#
sumAddNxx*
N*
T0